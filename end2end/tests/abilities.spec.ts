import { test, expect, type Page } from "@playwright/test";
import { connected, createSession, mockSays, mockSession, ready, send, signIn } from "./helpers";

// Judy's abilities (reference 000, 003): the Abilities page, her own processes made, edited
// with a preview and deleted; an agent's default processes with Select all; the startup
// process hidden yet shown on request; the `/` menu; an agent's `/session` asking every time.
test.describe.configure({ mode: "serial" });

async function judy(page: Page) {
  await signIn(page, "judy", "judy-password");
}

function card(page: Page, fn: string) {
  return page.locator(`.call[data-function="${fn}"]`).last();
}

test("a process is created, edited with a preview, rendered for a session, and deleted", async ({ page }) => {
  await judy(page);
  await createSession(page, "Plans");
  await page.goto("/abilities");
  await ready(page);
  // Every ability, with its source, danger and whether it asks.
  await expect(page.locator('tr[data-ability="builtin:bash"]')).toContainText("dangerous");
  await expect(page.locator('tr[data-ability="builtin:command_session"]')).toContainText("asks every time");
  await expect(page.locator('tr[data-ability="system:__onstart_"]')).toContainText("startup");
  // A new process, its preview following what is typed.
  const form = page.locator(".new-process");
  await form.getByLabel("Name").fill("weekly");
  await form.getByLabel("Description").fill("the weekly review");
  await form.getByLabel("Content (markdown)").fill("Review for **{{user.name}}** in {{session.name}}.");
  await expect(page.locator("#new-process-preview strong")).toHaveText("{{user.name}}");
  await form.getByRole("button", { name: "Create process" }).click();
  await expect(page.getByRole("status")).toHaveText("Process created");
  const row = page.locator('tr[data-ability^="user:"]', { hasText: "weekly" });
  await expect(row).toContainText("the weekly review");
  // Edited: the preview follows, Save keeps it.
  await row.getByRole("link", { name: "weekly" }).click();
  await ready(page);
  const editor = page.locator(".edit-process-form");
  await editor.getByLabel("Content (markdown)").fill("Updated for *{{user.name}}* in {{session.name}}.");
  await expect(page.locator("#process-preview em")).toHaveText("{{user.name}}");
  await editor.getByRole("button", { name: "Save" }).click();
  await expect(page.getByRole("status")).toHaveText("Saved weekly");
  // Rendered for a chosen session: its variables filled.
  await page.getByLabel("Render for").selectOption({ label: "Plans" });
  await page.getByRole("button", { name: "Render" }).click();
  await ready(page);
  await expect(page.locator(".process-rendered")).toHaveText("Updated for judy in Plans.");
  // Filtered to her own processes, then deleted.
  await page.goto("/abilities?type=process&source=user");
  await ready(page);
  await expect(page.locator("tr[data-ability]")).toHaveCount(1);
  await page.locator('tr[data-ability^="user:"]').getByRole("link").click();
  await ready(page);
  await page.getByRole("button", { name: "Delete" }).click();
  await expect(page).toHaveURL(/\/abilities$/);
  await ready(page);
  await expect(page.locator('tr[data-ability^="user:"]')).toHaveCount(0);
  await expect(page.locator('tr[data-ability="builtin:help"]')).toHaveCount(1);
});

test("Select all makes every process listed a default, and not one made later", async ({ page }) => {
  await judy(page);
  const make = async (name: string) => {
    const r = await page.request.post("/api/abilities", { data: { name, content: `The ${name} process.` } });
    expect(r.status()).toBe(201);
    return (await r.json()).id as string;
  };
  const first = await make("alpha");
  const agents = await (await page.request.get("/api/agents")).json();
  const demo = agents.find((a: any) => a.provider === "scripted");
  await page.goto("/agents");
  await ready(page);
  const cardOf = page.locator(`.agent-card[data-agent-id="${demo.id}"]`);
  await cardOf.locator(".default-processes summary").click();
  await cardOf.getByRole("button", { name: "Select all" }).click();
  await expect(page.getByRole("status")).toHaveText("Every process listed is a default");
  const chosen = async () =>
    (await (await page.request.get(`/api/agents/${demo.id}`)).json()).default_processes as string[];
  expect(await chosen()).toEqual(["system:__onstart_", "system:act", first]);
  // A process made later is not chosen; reopened, the form lists it unchecked.
  const later = await make("beta");
  await page.goto("/agents");
  await ready(page);
  await cardOf.locator(".default-processes summary").click();
  const box = (id: string) => cardOf.locator(`input[type="checkbox"][value="${id}"]`);
  await expect(box(later)).not.toBeChecked();
  await expect(box(first)).toBeChecked();
  expect(await chosen()).not.toContain(later);
  // Unchecked and saved, one leaves the list.
  await box("system:act").uncheck();
  await box(later).check();
  await cardOf.getByRole("button", { name: "Save default processes" }).click();
  await expect(page.getByRole("status")).toHaveText("Default processes saved");
  expect(await chosen()).toEqual(["system:__onstart_", first, later]);
});

test("a startup message is hidden, shown on request, and reached the agent", async ({ page }) => {
  await judy(page);
  const r = await page.request.post("/api/abilities", {
    data: { name: "_onstart_judy", content: "Startup note for {{user.name}}." },
  });
  expect(r.status()).toBe(201);
  await mockSession(page, "Startup");
  await send(page, mockSays("Hello."));
  const agentMessages = page.locator(".msg-agent:not(.live)");
  await expect(agentMessages.last()).toContainText("Hello.", { timeout: 15_000 });
  await expect(page.getByTestId("messages")).not.toContainText("Startup note for judy.");
  await page.getByLabel("Show hidden messages").check();
  await expect(page.locator(".msg-hidden", { hasText: "Startup note for judy." })).toHaveCount(1);
  await page.getByLabel("Show hidden messages").uncheck();
  await expect(page.getByTestId("messages")).not.toContainText("Startup note for judy.");
  // It reaches the agent with every call: the mock echoes what it was sent.
  await send(page, "what were you told? [[mock echo]]");
  await expect(agentMessages.last()).toContainText("Startup note for judy.", { timeout: 15_000 });
});

test("the / menu lists the commands; one chosen and sent runs at once", async ({ page }) => {
  await judy(page);
  await createSession(page, "Commands");
  await connected(page);
  const box = page.getByLabel("Message", { exact: true });
  const menu = page.locator(".command-menu");
  await expect(menu).toBeHidden();
  await box.pressSequentially("/");
  await expect(menu).toBeVisible();
  await expect(menu.locator("li:visible")).toHaveCount(8);
  await expect(menu).toContainText("Start, rename, archive or restore a session.");
  await box.pressSequentially("st");
  await expect(menu.locator("li:visible")).toHaveCount(2);
  await menu.getByRole("button", { name: "/start" }).click();
  await expect(box).toHaveValue("/start ");
  await expect(menu).toBeHidden();
  await box.press("Enter");
  await expect(card(page, "command_start").getByTestId("call-state")).toHaveText("done", { timeout: 15_000 });
  // With the menu open, Enter takes its first command into the box; nothing is sent.
  await box.pressSequentially("/upd");
  await expect(menu.locator("li:visible")).toHaveCount(1);
  await box.press("Enter");
  await expect(box).toHaveValue("/update_usage ");
  await expect(menu).toBeHidden();
  await box.fill("");
  // A whole command's name typed, Enter sends it.
  await box.pressSequentially("/start");
  await expect(menu).toBeVisible();
  await box.press("Enter");
  await expect(page.locator('.call[data-function="command_start"]')).toHaveCount(2, { timeout: 15_000 });
  // A typed command's arguments that are wrong: a note with its usage.
  await send(page, "/session fly");
  await expect(page.getByTestId("messages")).toContainText("Usage: /session new");
});

test("an agent's /session asks every time; approved in one tab, both tabs show it", async ({ page, context }) => {
  await judy(page);
  const id = await mockSession(page, "Agent commands");
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  await send(page, '[[mock tool=command_session input={"action": "new", "name": "Made by the agent"} then="Made it."]]');
  for (const p of [page, other]) {
    await expect(card(p, "command_session").getByTestId("call-state")).toHaveText("waiting for your approval", { timeout: 15_000 });
    await expect(card(p, "command_session").getByRole("button", { name: /Always allow/ })).toHaveCount(0);
  }
  await card(other, "command_session").getByRole("button", { name: "Approve" }).click();
  for (const p of [page, other]) {
    await expect(card(p, "command_session").getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
    await expect(p.locator(".msg-agent:not(.live)").last()).toContainText("Made it.", { timeout: 20_000 });
  }
  const sessions = await (await page.request.get("/api/sessions")).json();
  expect(sessions.map((s: any) => s.name)).toContain("Made by the agent");
});
