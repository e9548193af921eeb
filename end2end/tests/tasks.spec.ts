import { test, expect, type Page } from "@playwright/test";
import { connected, mockSession, ready, send, signIn } from "./helpers";

// Olive's Tasks board (reference 004): a task made on the board, dragged to In progress,
// moved to Done with the keyboard, opened into its history, canceled behind the filter;
// a task her agent makes appears on the open board by itself.
test.describe.configure({ mode: "serial" });

function card(page: Page, id: string) {
  return page.getByTestId(`task-${id}`);
}

function column(page: Page, status: string) {
  return page.getByTestId(`column-${status}`);
}

test("a card is made, dragged, moved by keyboard, opened and canceled", async ({ page }) => {
  await signIn(page, "olive", "olive-password");
  await page.goto("/tasks");
  await ready(page);
  for (const name of ["Triage", "Backlog", "Todo", "In progress", "Done"]) {
    await expect(page.locator(".board-column h2", { hasText: name })).toHaveCount(1);
  }
  await expect(column(page, "canceled")).toHaveCount(0);

  await page.getByLabel("New task").fill("Write the report");
  await page.getByRole("button", { name: "Add" }).click();
  await expect(column(page, "todo").getByTestId("task-PER-1")).toContainText("Write the report");

  // A change made elsewhere (another tab, an agent) has the board read itself again; that
  // page is slow to come and arrives after the drag's own, newer, reading: it is not shown.
  let slow = true;
  let delivered = false;
  await page.route(/\/tasks$/, async (route) => {
    if (!slow || route.request().method() !== "GET") return route.continue();
    slow = false;
    const stale = await route.fetch();
    await new Promise((r) => setTimeout(r, 2_000));
    await route.fulfill({ response: stale });
    delivered = true;
  });
  const changed = await page.request.patch("/api/tasks/PER-1", { data: { description: "Due Friday" } });
  expect(changed.status()).toBe(200);
  await expect.poll(() => slow).toBe(false);
  // Dragged onto In progress.
  await card(page, "PER-1").dragTo(column(page, "in_progress"));
  await expect(column(page, "in_progress").getByTestId("task-PER-1")).toBeVisible();
  await expect(column(page, "todo").getByTestId("task-PER-1")).toHaveCount(0);
  await expect.poll(() => delivered, { timeout: 10_000 }).toBe(true);
  await expect(column(page, "in_progress").getByTestId("task-PER-1")).toBeVisible();
  await page.unroute(/\/tasks$/);

  // Moved to Done with the keyboard: the card's own form.
  const move = card(page, "PER-1").getByLabel("Move PER-1");
  await move.focus();
  await move.selectOption("done");
  await move.press("Tab");
  await page.keyboard.press("Enter");
  await expect(column(page, "done").getByTestId("task-PER-1")).toBeVisible();

  // Opened: its fields edited, and its history.
  await card(page, "PER-1").getByRole("link", { name: "PER-1" }).click();
  await ready(page);
  await expect(page.getByTestId("task-title")).toHaveText("PER-1 · Write the report");
  await page.getByLabel("Project").fill("Quarterly");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.getByRole("status")).toHaveText("Saved PER-1");
  const history = page.getByTestId("task-history");
  await expect(history).toContainText("made as PER-1");
  await expect(history).toContainText("status: todo → in_progress");
  await expect(history).toContainText("status: in_progress → done");
  await expect(history).toContainText("project: Quarterly");

  // Canceled: off the board, back behind the filter.
  await page.goto("/tasks");
  await ready(page);
  await card(page, "PER-1").getByLabel("Move PER-1").selectOption("canceled");
  await card(page, "PER-1").getByRole("button", { name: "Move" }).click();
  await expect(card(page, "PER-1")).toHaveCount(0);
  await page.getByLabel("Show canceled").check();
  await page.getByRole("button", { name: "Show" }).click();
  await expect(column(page, "canceled").getByTestId("task-PER-1")).toBeVisible();

  // A team of her own, chosen in the picker: its own identifiers.
  await page.locator(".new-team summary").click();
  await page.getByLabel("Team name").fill("Work");
  await page.getByLabel("Team key").fill("WRK");
  await page.getByRole("button", { name: "Make the team" }).click();
  await expect(page.getByRole("status")).toHaveText("Team made");
  await page.getByLabel("Team", { exact: true }).selectOption("WRK");
  await page.getByRole("button", { name: "Show" }).click();
  await page.getByLabel("New task").fill("Ship it");
  await page.getByRole("button", { name: "Add" }).click();
  await expect(column(page, "todo").getByTestId("task-WRK-1")).toContainText("Ship it");
});

test("a task the agent makes appears on the open board by itself", async ({ page, context }) => {
  await signIn(page, "olive", "olive-password");
  const board = await context.newPage();
  await board.goto("/tasks");
  await ready(board);
  await expect(column(board, "todo")).toBeVisible();
  await mockSession(page, "Board");
  const input = JSON.stringify({ title: "Call the bank", priority: 1 });
  await send(page, `[[mock tool=create_task input=${input} then="Made it."]]`);
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("Made it.", { timeout: 20_000 });
  await expect(column(board, "todo").getByTestId("task-PER-2")).toContainText("Call the bank", { timeout: 20_000 });
  await expect(card(board, "PER-2")).toContainText("urgent");
  await connected(page);
});
