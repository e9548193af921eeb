import { test, expect } from "@playwright/test";
import { mockSession, send, signIn } from "./helpers";

// Rosa's keyboard: each shortcut the `?` list names does what it says (search, a new
// session, the message box, Stop, editing the last message), and the list names them all.
test.describe.configure({ mode: "serial" });

test("every shortcut on the ? list does what the list says", async ({ page }) => {
  await signIn(page, "rosa", "rosa-password");
  const first = await mockSession(page, "Keys");
  const box = page.getByLabel("Message", { exact: true });

  // ? lists the five, with their keys.
  await page.locator("body").click({ position: { x: 5, y: 5 } });
  await page.keyboard.press("?");
  const list = page.getByRole("dialog", { name: "Keyboard shortcuts" });
  await expect(list).toBeVisible();
  for (const [keys, what] of [
    ["Ctrl+K", "Search your sessions"],
    ["Alt+N", "New session"],
    ["Shift+Esc", "Go to the message box"],
    ["Alt+S", "Stop the reply"],
    ["↑ in an empty message box", "Edit your last message"],
  ]) {
    await expect(list.locator("dt", { hasText: keys })).toHaveCount(1);
    await expect(list.locator("dd", { hasText: what })).toHaveCount(1);
  }
  await page.keyboard.press("Escape");
  await expect(list).toBeHidden();

  // Shift+Esc: the message box, from anywhere on the page.
  await expect(box).not.toBeFocused();
  await page.keyboard.press("Shift+Escape");
  await expect(box).toBeFocused();

  // Alt+S stops a reply while it streams, keeping what arrived.
  const long = Array.from({ length: 300 }, (_, i) => `word${i}`).join(" ");
  await send(page, `[[mock chunk=6 delay_ms=80 text=${JSON.stringify(long + " NEVER-SHOWN")}]]`);
  await expect(page.locator(".msg-agent.live")).toContainText("word3", { timeout: 10_000 });
  await page.keyboard.press("Alt+s");
  const reply = page.locator(".msg-agent:not(.live)").last();
  await expect(reply).toContainText("Stopped", { timeout: 10_000 });
  await expect(reply).not.toContainText("NEVER-SHOWN");

  // ↑ in the empty message box: the last message, to edit.
  await box.click();
  await page.keyboard.press("ArrowUp");
  await expect(box).toHaveValue(/NEVER-SHOWN/);
  await page.keyboard.press("Escape");
  await expect(box).toHaveValue("");

  // Alt+N: the new session's name; Enter makes it and opens it.
  await page.locator("body").click({ position: { x: 5, y: 5 } });
  await page.keyboard.press("Alt+n");
  const name = page.getByLabel("New session name");
  await expect(name).toBeFocused();
  await page.keyboard.type("Made by keys");
  await page.keyboard.press("Enter");
  await expect(page).not.toHaveURL(new RegExp(`/s/${first}$`));
  await expect(page).toHaveURL(/\/s\/\d+$/);
  await expect(page.locator(".session-list a[aria-current=page]")).toHaveText("Made by keys");

  // Ctrl+K: the search box.
  await page.locator("body").click({ position: { x: 5, y: 5 } });
  await page.keyboard.press("Control+k");
  await expect(page.getByRole("searchbox", { name: "Search your sessions" })).toBeFocused();
});
