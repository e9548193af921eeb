import { test, expect, type Page } from "@playwright/test";
import { connected, mockSession, send, signIn } from "./helpers";

// Pia's agent changes its own instructions (reference 004): it proposes a change, whose
// card slides in beside the chat with the diff; approved in one tab, every tab follows and
// the agent is told; another is rejected. The Config page shows each key's history, edits
// it and restores an old version.
test.describe.configure({ mode: "serial" });

function proposal(page: Page) {
  return page.locator('.call[data-function="propose_config_change"]').last();
}

/** The mock agent proposes `content` for `key`, then says "Noted." once told. */
function proposes(key: string, content: string, reason: string) {
  const input = JSON.stringify({ key, content, reason });
  return `[[mock tool=propose_config_change input=${input} then="Noted."]]`;
}

test("a proposed change slides in with its diff; approved in one tab, both follow", async ({ page, context }) => {
  await signIn(page, "pia", "pia-password");
  const id = await mockSession(page, "Self-modification");
  // The agent reads a key: what it read opens beside the chat, until closed; a reload
  // shows it in its card only.
  await send(page, `[[mock tool=read_config input={"key": "capability:config"} then="I see."]]`);
  const read = page.locator('.call[data-function="read_config"] .config-read');
  await expect(read).toHaveAttribute("data-panel", "", { timeout: 20_000 });
  await expect(read).toContainText("capability:config (v1):");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("I see.", { timeout: 20_000 });
  await expect(read).toHaveAttribute("data-panel", "");
  await read.getByRole("button", { name: "Close" }).click();
  await expect(read).not.toHaveAttribute("data-panel");
  await page.reload();
  await connected(page);
  await expect(read).toBeVisible();
  await expect(read).not.toHaveAttribute("data-panel");
  await expect(read.getByRole("button", { name: "Close" })).toBeHidden();
  await send(page, proposes("capability:config", "Always put my personal tasks in Personal.\n", "you asked me to"));
  const card = proposal(page);
  await expect(card).toHaveClass(/call-waiting/, { timeout: 20_000 });
  await expect(card).toHaveClass(/call-proposal/);
  const panel = card.getByTestId("config-change");
  await expect(panel).toBeVisible();
  await expect(panel).toContainText("Proposed change to capability:config (from v1)");
  await expect(panel).toContainText("you asked me to");
  await expect(panel.locator(".diff-insert")).toHaveText(["+ Always put my personal tasks in Personal."]);
  await expect(panel.locator(".diff-delete").first()).toBeVisible();
  await expect(card.getByRole("button", { name: /Always allow/ })).toHaveCount(0);

  // Another tab shows the same card, from the log.
  const other = await context.newPage();
  await other.goto(`/s/${id}`);
  await connected(other);
  await expect(proposal(other)).toHaveClass(/call-waiting/);
  await proposal(other).getByRole("button", { name: "Approve" }).click();
  for (const p of [page, other]) {
    await expect(proposal(p).getByTestId("call-state")).toHaveText("done", { timeout: 20_000 });
    await expect(proposal(p)).not.toHaveClass(/call-waiting/);
    await expect(p.locator(".msg-agent:not(.live)").last()).toContainText("Noted.", { timeout: 20_000 });
  }
  await proposal(page).locator(".call-result summary").click();
  await expect(proposal(page).locator(".call-result pre")).toHaveText("approved: capability:config is now v2");

  // A second proposal, rejected: the agent is told, nothing is written.
  await send(page, proposes("capability:config", "Forget that.\n", "changed my mind"));
  await expect(proposal(page).getByTestId("config-change")).toContainText("(from v2)", { timeout: 20_000 });
  await proposal(page).getByRole("button", { name: "Reject" }).click();
  await expect(proposal(page).getByTestId("call-state")).toHaveText("denied", { timeout: 20_000 });
  await expect(proposal(other).getByTestId("call-state")).toHaveText("denied", { timeout: 20_000 });
  const cfg = await (await page.request.get("/api/configs/capability:config")).json();
  expect(cfg.version).toBe(2);
  await other.close();
});

test("the Config page shows a key's history, edits it and restores an old version", async ({ page }) => {
  await signIn(page, "pia", "pia-password");
  await page.goto("/config?key=capability:config");
  await expect(page.getByTestId("config-key")).toHaveText("capability:config");
  await expect(page.getByTestId("config-version")).toHaveText("Version 2");
  const history = page.locator(".config-history > li");
  await expect(history).toHaveCount(2);
  await expect(history.nth(0)).toContainText("v2 · agent");
  await expect(history.nth(0)).toContainText("you asked me to");
  await expect(history.nth(0).locator(".diff-insert")).toHaveText(["+ Always put my personal tasks in Personal."]);
  await expect(history.nth(1)).toContainText("v1 · hero");
  // The keys, each with its version.
  await expect(page.locator('[data-key="system_prompt"]')).toContainText("never written");
  await expect(page.locator('[data-key="capability:config"]')).toContainText("v2");

  // A direct edit is the next version.
  await page.getByLabel("Content of capability:config").fill("Mine now.\n");
  await page.getByLabel("Reason").fill("edited by hand");
  await page.getByRole("button", { name: "Save as a new version" }).click();
  await expect(page.getByRole("status")).toHaveText("Saved capability:config");
  await expect(page.getByTestId("config-version")).toHaveText("Version 3");
  await expect(history.nth(0)).toContainText("v3 · user");
  await expect(history.nth(0)).toContainText("edited by hand");

  // Restoring v1 writes its content again, as v4.
  await history.filter({ hasText: "v1 · hero" }).getByRole("button", { name: "Restore this version" }).click();
  await expect(page.getByTestId("config-version")).toHaveText("Version 4");
  await expect(history.nth(0)).toContainText("restored v1");
  await expect(page.getByLabel("Content of capability:config")).toHaveValue(/read_config/);
});
