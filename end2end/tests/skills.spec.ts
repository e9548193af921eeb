import { test, expect, type Page } from "@playwright/test";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connected, createSession, ready, signIn } from "./helpers";

// Kim's skills (reference 002 §8–13): the Skills page's tiers, what a higher tier hides and
// why a folder is no skill; the scored search; a personal skill made on the page and offered
// in the system prompt; a folder imported, opened, edited and deleted; an agent's choice of
// skills. Then alice, the administrator, makes a global skill internal and grants it.
test.describe.configure({ mode: "serial" });

/** This run's data directory (serve-for-tests.sh writes where it is). */
function dataDir(): string {
  return readFileSync("../target/e2e-data-dir", "utf8").trim();
}

/** A skill's folder `name` under `root`, with its SKILL.md. */
function writeSkill(root: string, name: string, skillMd: string) {
  mkdirSync(join(root, name), { recursive: true });
  writeFileSync(join(root, name, "SKILL.md"), skillMd);
}

async function kim(page: Page) {
  await signIn(page, "kim", "kim-password");
}

async function openSkills(page: Page, query = "") {
  await page.goto(`/skills${query}`);
  await ready(page);
}

async function skillNames(page: Page): Promise<string[]> {
  const list = await (await page.request.get("/api/skills")).json();
  return list.skills.map((s: any) => s.name);
}

test("the page lists each tier, what a higher tier hides, and why a folder is no skill", async ({ page }) => {
  await kim(page);
  // Her workspace's and project's folders, as an agent's bash would leave them.
  const me = await (await page.request.get("/api/me")).json();
  const workspace = join(dataDir(), "workspaces", String(me.id));
  writeSkill(
    join(workspace, "skills"),
    "deploy-steps",
    "---\nname: deploy-steps\ndescription: Deploy the service to production, step by step.\n---\nRun {baseDir}/deploy.sh.\n",
  );
  writeSkill(
    join(workspace, ".agents", "skills"),
    "deploy-steps",
    "---\nname: deploy-steps\ndescription: The project's older deploy notes.\n---\nOld.\n",
  );
  writeSkill(join(workspace, "skills"), "broken-skill", "---\nname: broken-skill\ndescription: [unclosed\n---\nBody\n");
  await openSkills(page);
  // A personal skill from the New form: its template without a name is refused in the
  // server's words, then filled in.
  const form = page.locator(".new-skill");
  await expect(form.getByLabel("SKILL.md")).toHaveValue("---\nname: \ndescription: \n---\n");
  await form.getByLabel("Name", { exact: true }).fill("release-notes");
  await form.getByRole("button", { name: "Create skill" }).click();
  await expect(form.getByRole("alert")).toContainText("no `name`");
  await form
    .getByLabel("SKILL.md")
    .fill(
      "---\nname: release-notes\ndescription: Write release notes from a changelog.\nlicense: MIT\ncompatibility: any shell\n---\n# Release notes\n\nGroup the changes by **kind**.\n",
    );
  await form.getByRole("button", { name: "Create skill" }).click();
  await expect(page.getByRole("status")).toHaveText("Skill saved");
  // The tiers, highest first (she has no global skill).
  await expect(page.locator(".skill-tier h2")).toHaveText(["Workspace", "Project", "Personal", "Built-in"]);
  const tier = (name: string) => page.getByRole("region", { name, exact: true });
  await expect(tier("Workspace").locator('li[data-skill="deploy-steps"]')).toContainText("Deploy the service to production");
  await expect(tier("Project").locator('li[data-skill="deploy-steps"]')).toContainText("overridden by workspace");
  await expect(tier("Workspace").locator('li[data-skill="deploy-steps"]')).not.toContainText("overridden");
  await expect(tier("Personal").locator('li[data-skill="release-notes"]')).toContainText("private");
  await expect(tier("Built-in").locator('li[data-skill="writing-skills"]')).toContainText("public");
  // The broken folder says why, in the words the API gives.
  const list = await (await page.request.get("/api/skills")).json();
  const broken = list.skills.find((s: any) => s.name === "broken-skill");
  expect(broken.error).toMatch(/^SKILL\.md line \d+: /);
  await expect(tier("Workspace").locator('li[data-skill="broken-skill"] .skill-error')).toHaveText(broken.error);
  await expect(tier("Workspace").getByRole("link", { name: "broken-skill" })).toHaveCount(0);
  // Opened: its SKILL.md rendered, its fields, its files; a file opens to its text.
  await tier("Personal").getByRole("link", { name: "release-notes" }).click();
  await ready(page);
  const detail = page.getByRole("region", { name: "Skill release-notes" });
  await expect(detail.locator(".skill-body strong")).toHaveText("kind");
  await expect(detail.locator(".skill-fields dt")).toHaveText(["License", "Compatibility"]);
  await expect(detail.locator(".skill-fields dd")).toHaveText(["MIT", "any shell"]);
  await detail.getByRole("button", { name: "SKILL.md" }).click();
  await ready(page);
  await expect(page.getByRole("region", { name: "SKILL.md" }).locator("pre")).toContainText("Group the changes by **kind**.");
  // The one a higher tier hides opens too, marked so.
  await openSkills(page, "?skill=deploy-steps&tier=project");
  await expect(page.getByRole("region", { name: "Skill deploy-steps" })).toContainText("The project's older deploy notes.");
  await expect(page.getByRole("region", { name: "Skill deploy-steps" })).toContainText("overridden by workspace");
});

test("a search ranks the skills, with each score and its parts", async ({ page }) => {
  await kim(page);
  await openSkills(page);
  await expect(page.getByTestId("search-mode")).toHaveText("Search mode: bm25");
  await page.getByLabel("Search skills").fill("deploy production");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await ready(page);
  await expect(page).toHaveURL(/\/skills\?q=deploy\+production$/);
  const hits = page.getByRole("list", { name: "Search results" }).getByRole("listitem");
  const api = await (await page.request.post("/api/skills/search", { data: { query: "deploy production" } })).json();
  expect(api.results[0].name).toBe("deploy-steps");
  await expect(hits).toHaveCount(api.results.length);
  await expect(hits.first()).toHaveAttribute("data-skill", "deploy-steps");
  const top = api.results[0];
  await expect(hits.first()).toContainText(`score ${top.score.toFixed(2)} (BM25 ${top.bm25.toFixed(2)})`);
  // A result opens its skill.
  await hits.first().getByRole("link", { name: "deploy-steps" }).click();
  await ready(page);
  await expect(page.getByRole("region", { name: "Skill deploy-steps" })).toContainText("Deploy the service to production");
});

test("a personal skill is offered in the agent's system prompt", async ({ page }) => {
  await kim(page);
  await createSession(page, "With skills");
  await connected(page);
  await page.getByRole("button", { name: "View system prompt" }).click();
  const prompt = page.getByTestId("system-prompt");
  await expect(prompt).toContainText("## Skills");
  await expect(prompt).toContainText(
    "<name>release-notes</name><description>Write release notes from a changelog.</description>",
  );
  await expect(prompt).toContainText("<name>deploy-steps</name>");
  await expect(prompt).not.toContainText("broken-skill");
  // The header links the Skills page.
  await page.getByRole("link", { name: "Skills", exact: true }).click();
  await expect(page).toHaveURL(/\/skills$/);
});

test("a folder is imported with its text files, opened, edited and deleted", async ({ page }) => {
  await kim(page);
  const dir = mkdtempSync(join(tmpdir(), "hero-skill-"));
  const folder = join(dir, "pdf-tools");
  mkdirSync(join(folder, "scripts"), { recursive: true });
  const skillMd = "---\nname: pdf-tools\ndescription: Fill PDF forms.\nmetadata:\n  author: ada\n---\nRun {baseDir}/scripts/fill.py.\n";
  writeFileSync(join(folder, "SKILL.md"), skillMd);
  writeFileSync(join(folder, "scripts", "fill.py"), "print('filled')\n");
  writeFileSync(join(folder, "logo.png"), Buffer.from([0x89, 0x50, 0x4e, 0x47, 0xff, 0x00]));
  try {
    await openSkills(page);
    await page.getByLabel("Folder").setInputFiles(folder);
    await page.getByRole("button", { name: "Import" }).click();
    await expect(page.getByRole("status")).toHaveText(
      "Imported pdf-tools with SKILL.md and 1 file; left out: logo.png (not text)",
    );
    await page.getByRole("region", { name: "Personal" }).getByRole("link", { name: "pdf-tools" }).click();
    await ready(page);
    const detail = page.getByRole("region", { name: "Skill pdf-tools" });
    await expect(detail.getByRole("list", { name: "Files" }).getByRole("listitem")).toHaveText([
      /^SKILL\.md \d+ B$/,
      /^scripts\/fill\.py 16 B$/,
    ]);
    await expect(detail.locator(".skill-fields dd")).toHaveText(["author: ada"]);
    // {baseDir} is where skill_get reads the skill's files.
    await expect(detail.locator(".skill-body")).toContainText("Run skill://pdf-tools/scripts/fill.py.");
    await detail.getByRole("button", { name: "scripts/fill.py" }).click();
    await ready(page);
    await expect(page.getByRole("region", { name: "scripts/fill.py" })).toContainText("print('filled')");
    // Edited: its SKILL.md written back whole, then saved; its files stay.
    await page.getByRole("region", { name: "Skill pdf-tools" }).getByRole("link", { name: "Edit" }).click();
    await ready(page);
    const editor = page.getByRole("region", { name: "Edit skill" });
    const text = editor.getByLabel("SKILL.md");
    await expect(text).toHaveValue(skillMd);
    await text.fill(skillMd.replace("Fill PDF forms.", "Fill and sign PDF forms."));
    await editor.getByRole("button", { name: "Save" }).click();
    await expect(page.getByRole("status")).toHaveText("Saved pdf-tools");
    const saved = await (await page.request.get("/api/skills/pdf-tools")).json();
    expect(saved.description).toBe("Fill and sign PDF forms.");
    expect(saved.files.map((f: any) => f.path)).toEqual(["SKILL.md", "scripts/fill.py"]);
    // A folder without its SKILL.md is refused, saying so.
    rmSync(join(folder, "SKILL.md"));
    await page.getByLabel("Folder").setInputFiles(folder);
    await page.getByRole("button", { name: "Import" }).click();
    await expect(page.locator(".skill-import").getByRole("alert")).toHaveText("The folder pdf-tools has no SKILL.md at its top.");
    // Deleted, once confirmed.
    await openSkills(page, "?skill=pdf-tools&tier=personal");
    await page.locator(".skill-delete summary").click();
    await page.getByRole("button", { name: "Delete for good" }).click();
    await expect(page).toHaveURL(/\/skills$/);
    await ready(page);
    await expect(page.locator('li[data-skill="pdf-tools"]')).toHaveCount(0);
    expect(await skillNames(page)).not.toContain("pdf-tools");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("an agent is given all skills, none, or those chosen", async ({ page }) => {
  await kim(page);
  const agents = await (await page.request.get("/api/agents")).json();
  const demo = agents.find((a: any) => a.provider === "scripted");
  const given = async () =>
    (await (await page.request.get(`/api/agents/${demo.id}/skills`)).json()).skills.map((s: any) => s.name);
  expect(await given()).toContain("release-notes");
  await page.goto("/agents");
  await ready(page);
  const card = page.locator(`.agent-card[data-agent-id="${demo.id}"]`);
  const summary = card.locator(".agent-skills summary");
  await expect(summary).toHaveText("Skills: all");
  await summary.click();
  await card.getByLabel("No skills").check();
  await card.getByRole("button", { name: "Save skills" }).click();
  await expect(summary).toHaveText("Skills: none");
  expect(await given()).toEqual([]);
  // Chosen: the skills in use are listed, the broken one and the hidden one are not.
  await summary.click();
  await expect(card.locator(".skill-choices")).toContainText("deploy-steps");
  await expect(card.locator(".skill-choices")).not.toContainText("broken-skill");
  await card.getByLabel("Chosen").check();
  await card.getByLabel("deploy-steps").check();
  await card.getByRole("button", { name: "Save skills" }).click();
  await expect(summary).toHaveText("Skills: 1 chosen");
  expect(await given()).toEqual(["deploy-steps"]);
  // All again: null, every skill, those made later too.
  await summary.click();
  await card.getByLabel("All skills").check();
  await card.getByRole("button", { name: "Save skills" }).click();
  await expect(summary).toHaveText("Skills: all");
  expect((await (await page.request.get(`/api/agents/${demo.id}`)).json()).skill_allow_list).toBeNull();
  expect(await given()).toContain("release-notes");
});

test("an administrator makes a global skill internal and grants it to a user", async ({ page, browser }) => {
  const globalDir = join(dataDir(), "skills");
  writeSkill(globalDir, "team-style", "---\nname: team-style\ndescription: The team's writing style.\n---\nWrite plainly.\n");
  const other = await browser.newPage();
  try {
    await signIn(page, "alice", "alice-password");
    await signIn(other, "kim", "kim-password");
    // The administrator's folder is read again once it changed.
    await expect.poll(() => skillNames(other), { timeout: 15_000 }).toContain("team-style");
    await openSkills(page, "?skill=team-style&tier=global");
    const admin = page.getByRole("region", { name: "Visibility and grants" });
    await expect(admin.getByLabel("Visibility")).toHaveValue("public");
    await admin.getByLabel("Visibility").selectOption("internal");
    await admin.getByRole("button", { name: "Save visibility" }).click();
    // Said once the page's part was read again.
    await expect(page.getByRole("status")).toHaveText("Visibility saved");
    await expect(admin.getByLabel("Visibility")).toHaveValue("internal");
    await expect.poll(() => skillNames(other)).not.toContain("team-style");
    // Granted to kim: she has it again.
    await admin.getByLabel("User").fill("kim");
    await admin.getByRole("button", { name: "Grant" }).click();
    await expect(page.getByRole("status")).toHaveText("Granted");
    const row = admin.getByRole("row").filter({ hasText: "kim" });
    await expect(row).toContainText("alice");
    await expect.poll(() => skillNames(other)).toContain("team-style");
    // A grant to nobody is refused in the server's words.
    await admin.getByLabel("User").fill("nobody-here");
    await admin.getByRole("button", { name: "Grant" }).click();
    await expect(admin.locator(".grant-form").getByRole("alert")).toContainText("nobody-here");
    // Removed: hers no more.
    await row.getByRole("button", { name: "Remove" }).click();
    await expect(page.getByRole("status")).toHaveText("Grant removed");
    await expect(admin.getByRole("row").filter({ hasText: "kim" })).toHaveCount(0);
    await expect.poll(() => skillNames(other)).not.toContain("team-style");
    // Granted to her agent instead, pinned to its version now: the agent has it, she does not.
    const agents = await (await other.request.get("/api/agents")).json();
    const demo = agents.find((a: any) => a.provider === "scripted");
    await admin.getByLabel("or agent id").fill(String(demo.id));
    await admin.getByLabel("Pinned version").selectOption({ label: "version 1" });
    await admin.getByRole("button", { name: "Grant" }).click();
    await expect(page.getByRole("status")).toHaveText("Granted");
    await expect(admin.getByRole("row").filter({ hasText: `agent ${demo.id}` })).toContainText("version 1");
    const given = async () =>
      (await (await other.request.get(`/api/agents/${demo.id}/skills`)).json()).skills.map((s: any) => s.name);
    await expect.poll(given).toContain("team-style");
    expect(await skillNames(other)).not.toContain("team-style");
  } finally {
    await other.close();
    rmSync(join(globalDir, "team-style"), { recursive: true, force: true });
  }
});
