import { test, expect } from "@playwright/test";
import { connected, ready, signIn } from "./helpers";
import * as fs from "node:fs";

// A session's export as Markdown and JSON, downloaded from its page; the JSON imported from
// the sidebar's form opens as a new session showing the same messages; everything as one
// archive.
test.describe.configure({ mode: "serial" });

test("a session exported and imported back shows the same messages", async ({ page }) => {
  await signIn(page, "mia", "mia-password");
  const name = `Round trip ${Date.now()}`;
  const r = await page.request.post("/api/sessions", { data: { name } });
  const id = (await r.json()).id;
  for (const content of ["First thought: **bold** plans.", "Second thought, with a <tag> in it."]) {
    const m = await page.request.post(`/api/sessions/${id}/messages`, { data: { content, private: true } });
    expect(m.status()).toBe(200);
  }
  await page.goto(`/s/${id}`);
  await connected(page);

  const [md] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "Markdown" }).click()]);
  expect(md.suggestedFilename()).toMatch(new RegExp(`^${id}-round-trip-\\d+\\.md$`));
  const text = fs.readFileSync(await md.path(), "utf8");
  expect(text).toContain(`# ${name}`);
  expect(text).toContain("First thought: **bold** plans.");

  const [json] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: "JSON" }).click()]);
  const file = test.info().outputPath("export.json");
  await json.saveAs(file);
  expect(JSON.parse(fs.readFileSync(file, "utf8")).format).toBe("hero-session");

  // Imported through the sidebar's form: the browser lands on the new session.
  await page.getByText("Import and export").click();
  await page.getByLabel("A Hero session export (JSON)").setInputFiles(file);
  await page.getByRole("button", { name: "Import a session" }).click();
  await expect(page).not.toHaveURL(new RegExp(`/s/${id}$`));
  await expect(page).toHaveURL(/\/s\/\d+$/);
  await connected(page);
  await expect(page.locator(".session-title")).toHaveText(name);
  const notes = page.locator(".msg-user .msg-body");
  await expect(notes).toHaveText(["First thought: **bold** plans.", "Second thought, with a <tag> in it."]);

  // Everything, as one archive.
  await page.getByText("Import and export").click();
  const [all] = await Promise.all([page.waitForEvent("download"), page.getByRole("link", { name: /Export everything/ }).click()]);
  expect(all.suggestedFilename()).toMatch(/^hero-export-\d{4}-\d\d-\d\d\.tar$/);
  expect(fs.statSync(await all.path()).size).toBeGreaterThan(1024);
});

test("Branch on a message opens a new session holding the conversation up to it", async ({ page }) => {
  await signIn(page, "mia", "mia-password");
  const name = `Fork ${Date.now()}`;
  const id = (await (await page.request.post("/api/sessions", { data: { name } })).json()).id;
  for (const content of ["Plan A: the mountains.", "Plan B: the sea.", "Plan C: stay home."]) {
    expect((await page.request.post(`/api/sessions/${id}/messages`, { data: { content, private: true } })).status()).toBe(200);
  }
  await page.goto(`/s/${id}`);
  await connected(page);
  await page.locator(".msg-user").nth(1).getByRole("button", { name: "Branch" }).click();
  await expect(page).not.toHaveURL(new RegExp(`/s/${id}$`));
  await expect(page).toHaveURL(/\/s\/\d+$/);
  await connected(page);
  await expect(page.locator(".session-title")).toHaveText(`Branch of ${name}`);
  await expect(page.locator(".msg-user .msg-body")).toHaveText(["Plan A: the mountains.", "Plan B: the sea."]);
  await expect(page.locator(".msg-system").last()).toContainText(`Branched from “${name}”`);
  // The original keeps all three.
  await page.goto(`/s/${id}`);
  await connected(page);
  await expect(page.locator(".msg-user")).toHaveCount(3);
});
