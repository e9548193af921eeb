import { test, expect } from "@playwright/test";
import { ready, signIn } from "./helpers";

// The admin page: Alice (an administrator) reaches it from the sidebar, makes Nora, sees her
// use, makes her an administrator and back, disables and enables her, and resets her
// password, which ends the sign-in Nora had. Bob, no administrator, has no link and is told
// the page is not his.
test.describe.configure({ mode: "serial" });

test("an administrator makes, changes and disables a user through the admin page", async ({ page, browser }) => {
  await signIn(page, "alice", "alice-password");
  await page.getByRole("link", { name: "Users", exact: true }).click();
  await expect(page).toHaveURL(/\/admin$/);
  await ready(page);
  await expect(page.getByRole("heading", { name: "Users", level: 1 })).toBeVisible();
  const alice = page.locator('tr[data-user="alice"]');
  await expect(alice).toContainText("administrator");
  // One's own administration is another's to change: no such buttons on Alice's row.
  await expect(alice.getByRole("button", { name: "Disable" })).toHaveCount(0);

  // A short password is refused in words, and nobody is made.
  const form = page.locator("form.admin-create");
  await form.getByLabel("Username").fill("nora");
  await form.getByLabel("Password").fill("short");
  await form.getByRole("button", { name: "Create" }).click();
  await expect(form.locator(".form-error")).toContainText("too short");
  await expect(page.locator('tr[data-user="nora"]')).toHaveCount(0);
  await form.getByLabel("Password").fill("nora-password");
  await form.getByRole("button", { name: "Create" }).click();
  const nora = page.locator('tr[data-user="nora"]');
  await expect(nora).toContainText("user");
  // Her use: no session yet, the demo agent every account starts with.
  await expect(nora.locator("td.num").nth(0)).toHaveText("0");
  await expect(nora.locator("td.num").nth(1)).toHaveText("1");
  await expect(nora).toContainText("never");

  // Nora signs in elsewhere.
  const other = await browser.newContext();
  const norasPage = await other.newPage();
  await signIn(norasPage, "nora", "nora-password");
  await expect(norasPage.getByRole("link", { name: "Users", exact: true })).toHaveCount(0);

  // Made an administrator, then not.
  await nora.getByRole("button", { name: "Make administrator" }).click();
  await expect(nora.locator(".badge")).toHaveText("administrator");
  expect((await norasPage.request.get("/api/admin/users")).status()).toBe(200);
  await nora.getByRole("button", { name: "Unmake administrator" }).click();
  await expect(nora.locator(".badge")).toHaveText("user");
  expect((await norasPage.request.get("/api/admin/users")).status()).toBe(403);

  // Disabled: her sign-in ends at once; enabled again.
  await nora.getByRole("button", { name: "Disable" }).click();
  await expect(nora.locator(".badge")).toHaveText("disabled");
  expect((await norasPage.request.get("/api/me")).status()).toBe(401);
  await nora.getByRole("button", { name: "Enable" }).click();
  await expect(nora.locator(".badge")).toHaveText("user");

  // A new password: the old one no longer signs in, the new one does.
  await nora.getByLabel("New password for nora").fill("nora-new-password");
  await nora.getByRole("button", { name: "Reset password" }).click();
  await expect(page.getByRole("status")).toContainText("Password changed");
  const refused = await norasPage.request.post("/api/auth/login", { data: { username: "nora", password: "nora-password" } });
  expect(refused.status()).toBe(401);
  await signIn(norasPage, "nora", "nora-new-password");
  await other.close();
});

test("the admin page is refused to a user who is not an administrator", async ({ page }) => {
  await signIn(page, "bob", "bob-password");
  await expect(page.getByRole("link", { name: "Users", exact: true })).toHaveCount(0);
  await page.goto("/admin");
  await ready(page);
  await expect(page.getByTestId("not-admin")).toContainText("Only an administrator");
  await expect(page.locator("table.admin-users")).toHaveCount(0);
  expect((await page.request.get("/api/admin/users")).status()).toBe(403);
});
