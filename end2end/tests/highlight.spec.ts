import { test, expect } from "@playwright/test";
import { connected, mockSays, mockSession, send, signIn } from "./helpers";

// A code block in a reply is highlighted once it is stored, by tokens the server cuts (the
// page's wasm holds no highlighter), and stays highlighted when drawn again after a reload;
// its copy button still copies the code as written.
test("a reply's code block is highlighted, and copies as written", async ({ page, context }) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await signIn(page, "mia", "mia-password");
  await mockSession(page, `Code ${Date.now()}`);
  const code = 'fn main() {\n    let n = 42; // the answer\n    println!("{n}");\n}';
  await send(page, mockSays("Here:\n```rust\n" + code + "\n```\nDone."));
  const block = page.locator(".msg-agent:not(.live) .code-block").last();
  await expect(block).toHaveAttribute("data-hl", "done");
  await expect(block.locator(".hl-keyword").first()).toHaveText("fn");
  await expect(block.locator(".hl-number")).toHaveText("42");
  await expect(block.locator(".hl-comment")).toContainText("the answer");
  await expect(block.locator("pre code")).toHaveText(code);
  await block.getByRole("button", { name: "Copy" }).click();
  expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(code + "\n");
  await page.reload();
  await connected(page);
  await expect(page.locator(".msg-agent .code-block").last().locator(".hl-keyword").first()).toHaveText("fn");
});
