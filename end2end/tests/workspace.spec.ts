import { test, expect } from "@playwright/test";
import { createSession, ready, sidebarItem, signIn } from "./helpers";

// One story, in order, as a person would use Hero: the tests share the server's data.
test.describe.configure({ mode: "serial" });

let alphaId = 0;
let betaId = 0;

test("signing in with a wrong password says so", async ({ page }) => {
  await page.goto("/");
  await expect(page).toHaveURL(/\/login$/);
  await ready(page);
  await page.getByLabel("Username").fill("alice");
  await page.getByLabel("Password").fill("not-her-password");
  await page.getByRole("button", { name: "Sign in" }).click();
  await expect(page.getByRole("alert")).toContainText("wrong username or password");
});

test("alice creates, renames, archives and restores a session", async ({ page }) => {
  await signIn(page, "alice", "alice-password");
  await expect(page.getByText("No sessions yet.")).toBeVisible();

  alphaId = await createSession(page, "Alpha");
  await expect(sidebarItem(page, alphaId)).toHaveText("Alpha");

  const rename = page.getByLabel("Session name", { exact: true });
  await rename.fill("Alpha renamed");
  await page.getByRole("button", { name: "Rename" }).click();
  await expect(page.getByTestId("session-title")).toHaveText("Alpha renamed");
  await expect(sidebarItem(page, alphaId)).toHaveText("Alpha renamed");

  await page.getByRole("button", { name: "Archive" }).click();
  await expect(page.getByTestId("session-status")).toHaveText("archived");
  const item = sidebarItem(page, alphaId);
  await expect(item).toHaveAttribute("data-status", "archived");
  // Archived sessions are shown in a red hue.
  const bg = await item.locator("a").evaluate((el) => getComputedStyle(el).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g)!.map(Number);
  expect(r).toBeGreaterThan(g);
  expect(r).toBeGreaterThan(b);

  await page.getByRole("button", { name: "Restore" }).click();
  await expect(page.getByTestId("session-status")).toHaveText("active");
  await expect(item).toHaveAttribute("data-status", "active");

  // The change survived: a reload renders it from the server.
  await page.reload();
  await expect(page.getByTestId("session-title")).toHaveText("Alpha renamed");
});

test("two tabs hold two different sessions", async ({ page, context }) => {
  await signIn(page, "alice", "alice-password");
  betaId = await createSession(page, "Beta");

  const tab1 = await context.newPage();
  const tab2 = await context.newPage();
  await tab1.goto(`/s/${alphaId}`);
  await tab2.goto(`/s/${betaId}`);
  await expect(tab1.getByTestId("session-title")).toHaveText("Alpha renamed");
  await expect(tab2.getByTestId("session-title")).toHaveText("Beta");
  // Each tab keeps its own session while the other moves on.
  await ready(tab2);
  await tab2.getByLabel("Session name", { exact: true }).fill("Beta in tab two");
  await tab2.getByRole("button", { name: "Rename" }).click();
  await expect(tab2.getByTestId("session-title")).toHaveText("Beta in tab two");
  await expect(tab1.getByTestId("session-title")).toHaveText("Alpha renamed");
  await expect(tab1.locator(".session-list a[aria-current='page']")).toHaveText("Alpha renamed");
});

test("sub-sessions are indented under their parent and agent sessions are blue", async ({ page }) => {
  await signIn(page, "alice", "alice-password");
  // Agents open sub-sessions through the API; the sidebar shows them under the parent.
  const resp = await page.request.post("/api/sessions", {
    data: { name: "Helper agent", parent_session_id: alphaId, status: "agent" },
  });
  expect(resp.status()).toBe(201);
  const child = (await resp.json()).id as number;
  await page.reload();
  await ready(page);
  const ids = await page.locator(".session-list li").evaluateAll((lis) =>
    lis.map((li) => Number(li.getAttribute("data-session-id"))),
  );
  expect(ids.indexOf(child)).toBe(ids.indexOf(alphaId) + 1);
  const parentBox = await sidebarItem(page, alphaId).locator("a").boundingBox();
  const childBox = await sidebarItem(page, child).locator("a").boundingBox();
  expect(childBox!.x).toBeGreaterThan(parentBox!.x);
  const bg = await sidebarItem(page, child).locator("a").evaluate((el) => getComputedStyle(el).backgroundColor);
  const [r, g, b] = bg.match(/\d+/g)!.map(Number);
  expect(b).toBeGreaterThan(r);
});

test("signing out ends the sign-in", async ({ page }) => {
  await signIn(page, "alice", "alice-password");
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/login$/);
  await page.goto(`/s/${alphaId}`);
  await expect(page).toHaveURL(/\/login$/);
  const me = await page.request.get("/api/me");
  expect(me.status()).toBe(401);
});

test("bob sees none of alice's sessions, in the UI or through the API", async ({ page }) => {
  await signIn(page, "bob", "bob-password");
  await expect(page.getByText("No sessions yet.")).toBeVisible();
  await expect(page.locator(".session-list")).not.toContainText("Alpha");
  await page.goto(`/s/${alphaId}`);
  await expect(page.getByText("This session does not exist, or is not yours.")).toBeVisible();
  await expect(page.locator("body")).not.toContainText("Alpha renamed");

  const list = await page.request.get("/api/sessions");
  expect(await list.json()).toEqual([]);
  const one = await page.request.get(`/api/sessions/${alphaId}`);
  expect(one.status()).toBe(404);
  const patch = await page.request.patch(`/api/sessions/${betaId}`, { data: { name: "taken" } });
  expect(patch.status()).toBe(404);
});
