import { test, expect, type Page } from "@playwright/test";
import { mockSays, mockSession, ready, send, signIn } from "./helpers";

// Liam's agent's memory (reference 002 §1, §14–15): the Memory page reached from the Agents
// page; a file made through the page (a bad path refused in words first), listed with whose
// it is and its size; the agent's own file beside it; a search showing the chunk found with
// its path, lines and score; the file opened, edited with its preview, saved, then saved
// empty and gone.
test.describe.configure({ mode: "serial" });

const PATH = "memory/2026-11-24.md";
const FIRST = "# 24 November\nShipped the memory page with a blue-green rollout.\n";
const EDITED = "# 24 November\nShipped the memory page with a blue-green rollout.\n\nThe **canary** held for an hour.\n";

async function demoId(page: Page): Promise<number> {
  const agents = await (await page.request.get("/api/agents")).json();
  return agents.find((a: any) => a.provider === "scripted").id;
}

async function listed(page: Page, id: number): Promise<any[]> {
  const r = await page.request.get(`/api/agents/${id}/memory/files`);
  expect(r.status()).toBe(200);
  return r.json();
}

test("a memory file is made, found, edited and deleted through the page", async ({ page }) => {
  await signIn(page, "liam", "liam-password");
  const id = await demoId(page);
  // The Agents page links each agent's memory, beside its files.
  await page.goto("/agents");
  await ready(page);
  const card = page.locator(`.agent-card[data-agent-id="${id}"]`);
  await expect(card.getByRole("link", { name: "Files", exact: true })).toBeVisible();
  await card.getByRole("link", { name: "Memory", exact: true }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${id}/memory$`));
  await ready(page);
  await expect(page.getByRole("heading", { name: "Memory", level: 1 })).toBeVisible();
  await expect(page.locator(".memory-empty")).toContainText("No memory yet");

  // A path that is no memory file is refused in the server's words, and nothing is stored.
  const form = page.locator(".new-memory");
  await form.getByLabel("Path").fill("notes.txt");
  await form.getByLabel("Content (markdown)").fill("a note");
  await form.getByRole("button", { name: "Save file" }).click();
  await expect(form.getByRole("alert")).toHaveText(
    '"notes.txt" is no memory file: memory is MEMORY.md or Markdown files under memory/',
  );
  expect(await listed(page, id)).toEqual([]);
  // So is a file past its size, with the bound.
  await form.getByLabel("Path").fill("memory/big.md");
  await form.getByLabel("Content (markdown)").fill("x".repeat(300 * 1024));
  await form.getByRole("button", { name: "Save file" }).click();
  await expect(form.getByRole("alert")).toHaveText("memory/big.md would be 300 KiB: a memory file is at most 256 KiB");
  expect(await listed(page, id)).toEqual([]);

  // Made as the user's own (the default), its preview drawn as it is typed.
  await form.getByLabel("Path").fill(PATH);
  await form.getByLabel("Content (markdown)").fill(FIRST);
  await expect(page.locator("#new-memory-preview h1")).toHaveText("24 November");
  await form.getByRole("button", { name: "Save file" }).click();
  await expect(page.getByRole("status")).toHaveText("File saved");
  const files = page.getByRole("table", { name: "Memory files" });
  const row = files.locator(`tr[data-path="${PATH}"]`);
  await expect(row).toHaveAttribute("data-scope", "user");
  await expect(row.locator("td")).toHaveText([PATH, "yours", `${Buffer.byteLength(FIRST)} B`, /^\d{4}-\d\d-\d\d \d\d:\d\d UTC$/]);

  // The agent's own MEMORY.md beside it, chosen in the form.
  await page.locator(".new-memory").getByLabel("Path").fill("MEMORY.md");
  await page.locator(".new-memory").getByLabel("Whose").selectOption("agent");
  await page.locator(".new-memory").getByLabel("Content (markdown)").fill("Liam drinks tea, never coffee.\n");
  await page.locator(".new-memory").getByRole("button", { name: "Save file" }).click();
  await expect(files.locator('tr[data-path="MEMORY.md"] td')).toHaveText([
    "MEMORY.md",
    "the agent's",
    "31 B",
    /UTC$/,
  ]);
  const api = await listed(page, id);
  expect(api.map((f) => [f.path, f.scope, f.size])).toEqual([
    ["MEMORY.md", "agent", 31],
    [PATH, "user", Buffer.byteLength(FIRST)],
  ]);

  // A search shows the chunk found: its file, lines, score and text, and the mode.
  await page.getByLabel("Search memory").fill("rollout");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await expect(page).toHaveURL(/\/memory\?q=rollout$/);
  await ready(page);
  await expect(page.getByTestId("search-mode")).toHaveText("Search mode: bm25");
  const found = await (await page.request.post(`/api/agents/${id}/memory/search`, { data: { query: "rollout" } })).json();
  expect(found.results.length).toBe(1);
  const top = found.results[0];
  expect(top.path).toBe(PATH);
  const hits = page.getByRole("list", { name: "Search results" }).getByRole("listitem");
  await expect(hits).toHaveCount(1);
  const hit = hits.first();
  await expect(hit).toHaveAttribute("data-path", PATH);
  await expect(hit.getByRole("link", { name: PATH })).toBeVisible();
  await expect(hit.locator(".memory-lines")).toHaveText(
    top.start_line === top.end_line ? `line ${top.start_line}` : `lines ${top.start_line}–${top.end_line}`,
  );
  expect(top.start_line).toBe(1);
  await expect(hit.locator(".memory-score")).toHaveText(`score ${top.score.toFixed(2)}`);
  expect(top.score).toBeGreaterThan(0);
  await expect(hit.locator(".memory-chunk")).toContainText("blue-green rollout");
  // A word in neither file finds nothing, and says so.
  await page.getByLabel("Search memory").fill("zeppelin");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await ready(page);
  await expect(page.locator("p.memory-hits")).toHaveText("Nothing in memory matches.");

  // Opened from the list: its text and its preview; edited, the preview follows; saved.
  await files.getByRole("link", { name: PATH }).click();
  await ready(page);
  const editor = page.getByRole("region", { name: `File ${PATH}` });
  const text = editor.getByLabel(`Content of ${PATH}`);
  await expect(text).toHaveValue(FIRST);
  await expect(editor.locator(".level")).toHaveText("yours");
  await expect(editor.locator("#memory-preview h1")).toHaveText("24 November");
  await text.fill(EDITED);
  await expect(editor.locator("#memory-preview strong")).toHaveText("canary");
  await editor.getByRole("button", { name: "Save" }).click();
  await expect(page.getByRole("status")).toHaveText(`Saved ${PATH}`);
  await expect(files.locator(`tr[data-path="${PATH}"] .memory-size`)).toHaveText(`${Buffer.byteLength(EDITED)} B`);
  const read = await (await page.request.get(`/api/agents/${id}/memory/files/${PATH}`)).json();
  expect(read).toEqual({ path: PATH, scope: "user", content: EDITED });
  // The search finds the new words.
  const again = await (await page.request.post(`/api/agents/${id}/memory/search`, { data: { query: "canary" } })).json();
  expect(again.results.map((r: any) => r.path)).toEqual([PATH]);

  // Saved empty: deleted, gone from the list, and the editor says so.
  await page.getByRole("region", { name: `File ${PATH}` }).getByLabel(`Content of ${PATH}`).fill("");
  await page.getByRole("region", { name: `File ${PATH}` }).getByRole("button", { name: "Save" }).click();
  await expect(files.locator(`tr[data-path="${PATH}"]`)).toHaveCount(0);
  await expect(page.getByTestId("memory-missing")).toHaveText(
    `${PATH} (yours) is not in this agent's memory: a file saved empty is deleted.`,
  );
  await expect(files.locator('tr[data-path="MEMORY.md"]')).toHaveCount(1);
  expect((await page.request.get(`/api/agents/${id}/memory/files/${PATH}`)).status()).toBe(404);
  expect((await listed(page, id)).map((f) => f.path)).toEqual(["MEMORY.md"]);
});

test("without the wasm, the page writes, lists, searches and opens what is stored", async ({ browser, baseURL }) => {
  const context = await browser.newContext({ javaScriptEnabled: false, baseURL });
  const page = await context.newPage();
  const login = await page.request.post("/api/auth/login", { data: { username: "liam", password: "liam-password" } });
  expect(login.status()).toBe(200);
  const id = await demoId(page);
  const path = "memory/projects/hero.md";
  // The New file form posts as a plain form, and the browser comes back to the page.
  await page.goto(`/agents/${id}/memory`);
  const form = page.locator(".new-memory");
  await form.getByLabel("Path").fill(path);
  await form.getByLabel("Content (markdown)").fill("# Hero\nIts memory is **sealed** with the owner's key.\n");
  await form.getByRole("button", { name: "Save file" }).click();
  await expect(page).toHaveURL(new RegExp(`/agents/${id}/memory`));
  expect((await page.request.get(`/api/agents/${id}/memory/files/${path}`)).status()).toBe(200);
  await page.goto(`/agents/${id}/memory`);
  const files = page.getByRole("table", { name: "Memory files" });
  await expect(files.locator(`tr[data-path="${path}"] td`).nth(1)).toHaveText("yours");
  await page.getByLabel("Search memory").fill("sealed");
  await page.getByRole("button", { name: "Search", exact: true }).click();
  await expect(page).toHaveURL(/\/memory\?q=sealed$/);
  const hit = page.getByRole("list", { name: "Search results" }).getByRole("listitem").first();
  await expect(hit).toHaveAttribute("data-path", path);
  await expect(hit.locator(".memory-score")).toHaveText(/^score \d+\.\d\d$/);
  // A result opens its file: its text, and its preview drawn by the server.
  await hit.getByRole("link", { name: path }).click();
  const editor = page.getByRole("region", { name: `File ${path}` });
  await expect(editor.getByLabel(`Content of ${path}`)).toHaveValue("# Hero\nIts memory is **sealed** with the owner's key.\n");
  await expect(editor.locator("#memory-preview strong")).toHaveText("sealed");
  await context.close();
});

test("another user's agent has no memory page for you", async ({ page }) => {
  await signIn(page, "liam", "liam-password");
  // An agent that is not his is a missing one, said in words, not a broken page.
  await page.goto("/agents/999999/memory");
  await ready(page);
  await expect(page.getByRole("alert").first()).toHaveText("agent not found");
});

test("after /compact in a mock conversation, the flush's note shows and its file is on the Memory page", async ({ page }) => {
  await signIn(page, "liam", "liam-password");
  const session = await mockSession(page, "Flush");
  await send(page, mockSays("Noted: the tulips go in in October."));
  await expect(page.locator(".msg-agent").last()).toContainText("tulips", { timeout: 15_000 });
  await send(page, "/compact");
  const file = `memory/${new Date().toISOString().slice(0, 10)}.md`;
  await expect(page.getByTestId("summarised")).toBeVisible({ timeout: 15_000 });
  // The note stays in the log, before the summary: a reload shows what it covers.
  await page.reload();
  await ready(page);
  await page.getByTestId("summarised").locator("summary").click();
  await page.getByTestId("summarised").getByRole("button", { name: "Show earlier" }).click();
  await expect(page.locator(".earlier")).toContainText(`Saved to memory: ${file}`);
  // The flush's own exchange is hidden until asked for.
  await expect(page.locator(".earlier")).not.toContainText("memory_write");
  await page.getByLabel("Show hidden messages").check();
  await expect(page.locator(".earlier")).toContainText("memory_write");
  // The file is on the agent's Memory page.
  const agents = await (await page.request.get("/api/agents")).json();
  const agent = agents.find((a: any) => a.name === "Mock Flush");
  await page.goto(`/agents/${agent.id}/memory`);
  await ready(page);
  await expect(page.getByRole("link", { name: file })).toBeVisible();
  expect(session).toBeGreaterThan(0);
});
