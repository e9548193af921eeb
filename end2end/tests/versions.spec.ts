import { test, expect } from "@playwright/test";
import { connected, mockSays, mockSession, send, signIn } from "./helpers";

// A message's versions: the user's message edited from its menu (and from Up in the empty
// box), the agent answering the edit, the "‹ 2/2 ›" switch going back and forth, followed
// by another tab and kept after a reload; an agent's reply regenerated, its versions browsable the same way.
test.describe.configure({ mode: "serial" });

test("an edit is answered again, and its versions switch, in another tab and after a reload too", async ({ page, context }) => {
  await signIn(page, "carol", "carol-password");
  const id = await mockSession(page, `Versions ${Date.now()}`);
  // A second tab on the same session follows every version live.
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  await send(page, `Plan a trip to Pairs ${mockSays("Paris is lovely in spring.")}`);
  const replies = page.locator(".msg-agent:not(.live)");
  await expect(replies.last()).toContainText("Paris is lovely in spring.");

  // Edit from the message's menu: the text comes into the box, a banner says so.
  await page.locator(".msg-user").last().getByRole("button", { name: "Edit" }).click();
  const box = page.getByLabel("Message", { exact: true });
  await expect(box).toHaveValue(/Plan a trip to Pairs/);
  await expect(page.getByTestId("editing")).toBeVisible();
  await box.fill(`Plan a trip to Rome ${mockSays("Rome it is: the Forum first.")}`);
  await box.press("Enter");
  await expect(page.getByTestId("editing")).toHaveCount(0);
  await expect(replies.last()).toContainText("Rome it is: the Forum first.");
  // One conversation shown: the edit and its answer, the typo's out of sight.
  await expect(page.locator(".msg-user")).toHaveCount(1);
  await expect(page.locator(".msg-user")).toContainText("Plan a trip to Rome");
  await expect(page.getByText("Paris is lovely in spring.")).toHaveCount(0);
  const versions = page.locator(".msg-user").getByTestId("versions");
  await expect(versions).toContainText("2/2");
  await expect(other.locator(".msg-user")).toContainText("Plan a trip to Rome");
  await expect(other.locator(".msg-user").getByTestId("versions")).toContainText("2/2");
  await expect(other.locator(".msg-agent:not(.live)").last()).toContainText("Rome it is: the Forum first.");

  // Back to the first version: the typo and its answer return.
  await versions.getByRole("button", { name: "Previous version" }).click();
  await expect(page.locator(".msg-user")).toContainText("Plan a trip to Pairs");
  await expect(replies.last()).toContainText("Paris is lovely in spring.");
  await expect(page.locator(".msg-user").getByTestId("versions")).toContainText("1/2");
  await expect(other.locator(".msg-user")).toContainText("Plan a trip to Pairs");
  await expect(other.locator(".msg-user").getByTestId("versions")).toContainText("1/2");
  await expect(other.locator(".msg-agent:not(.live)").last()).toContainText("Paris is lovely in spring.");
  await other.close();

  // After a reload, the version shown is the one chosen; forward again.
  await page.reload();
  await connected(page);
  await expect(page.locator(".msg-user")).toContainText("Plan a trip to Pairs");
  await page.locator(".msg-user").getByRole("button", { name: "Next version" }).click();
  await expect(page.locator(".msg-user")).toContainText("Plan a trip to Rome");
  await expect(replies.last()).toContainText("Rome it is");

  // Up in the empty box edits the last message; Esc leaves it as it was.
  await box.focus();
  await box.press("ArrowUp");
  await expect(box).toHaveValue(/Plan a trip to Rome/);
  await expect(page.getByTestId("editing")).toBeVisible();
  await box.press("Escape");
  await expect(page.getByTestId("editing")).toHaveCount(0);
  await expect(box).toHaveValue("");
});

test("a reply regenerated is a new version of it, browsable", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, `Regenerate ${Date.now()}`);
  await send(page, `Name a colour ${mockSays("Blue.")}`);
  const reply = page.locator(".msg-agent:not(.live)").last();
  await expect(reply).toContainText("Blue.");
  await reply.getByRole("button", { name: "Regenerate" }).click();
  // The same input answered again: a second version of the reply.
  await expect(page.locator(".msg-agent:not(.live)").last().getByTestId("versions")).toContainText("2/2");
  await expect(page.locator(".msg-agent:not(.live)")).toHaveCount(1);
  await page.locator(".msg-agent").getByRole("button", { name: "Previous version" }).click();
  await expect(page.locator(".msg-agent").getByTestId("versions")).toContainText("1/2");
  await page.reload();
  await connected(page);
  await expect(page.locator(".msg-agent").getByTestId("versions")).toContainText("1/2");
});
