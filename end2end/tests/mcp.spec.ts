import { test, expect } from "@playwright/test";
import { ready, signIn } from "./helpers";

// Quinn adds an MCP server of her own (reference 004): the test server she keeps in her
// workspace, run in her sandbox. Added, it starts and lists its tools, its environment's
// value never shown back; tested again; its tools are on the Permissions page under its
// capability, each asking; disabled, they leave it.
test.describe.configure({ mode: "serial" });

test("an MCP server is added, tested, and its tools are on the Permissions page", async ({ page }) => {
  await signIn(page, "quinn", "quinn-password");
  await page.goto("/mcp");
  await ready(page);
  await expect(page.getByText("No MCP server yet.")).toBeVisible();

  await page.getByLabel("Name").fill("kit");
  await page.getByLabel("Command or URL").fill("/workspace/mcp-server");
  await page.getByLabel("Secrets").fill("SECRET_TOKEN=quinns-hidden-value");
  await page.getByRole("button", { name: "Add and start" }).click();
  await expect(page.getByRole("status")).toHaveText("Added.", { timeout: 20_000 });
  const kit = page.locator('.mcp-server[data-server="kit"]');
  await expect(kit).toBeVisible({ timeout: 20_000 });
  await expect(kit.locator(".mcp-status")).toHaveText(/running|ready/);
  await expect(kit.locator('[data-function="mcp__kit__echo"]')).toContainText("safe");
  await expect(kit.locator('[data-function="mcp__kit__crash"]')).toContainText("dangerous");
  await expect(kit.locator(".mcp-secrets")).toHaveText("Environment: SECRET_TOKEN (values hidden)");
  await expect(kit.locator(".mcp-instructions")).toContainText("echo");
  await expect(kit.locator(".mcp-skipped")).toContainText("far_too_long");
  expect(await page.content()).not.toContain("quinns-hidden-value");

  // Tested again: it starts afresh and lists the same tools.
  await kit.getByRole("button", { name: "Test" }).click();
  await expect(page.getByRole("status")).toHaveText("Tested kit.", { timeout: 20_000 });
  await expect(kit.locator(".mcp-status")).toHaveText(/running|ready/);
  await expect(kit.locator(".mcp-error")).toHaveCount(0);

  // A second of the same name is refused, saying why.
  await page.getByLabel("Name").fill("kit");
  await page.getByLabel("Command or URL").fill("/workspace/mcp-server");
  await page.getByRole("button", { name: "Add and start" }).click();
  await expect(page.locator(".mcp-add [role=alert]")).toContainText("named kit already");

  // Its tools on Permissions, under its capability, asking.
  await page.goto("/permissions");
  await ready(page);
  const echo = page.locator('tr[data-function="mcp__kit__echo"]');
  await expect(echo).toBeVisible();
  await expect(echo.locator(".capability-tag")).toHaveText("mcp-kit");
  await expect(echo.getByLabel("Level of mcp__kit__echo")).toHaveValue("ask");

  // Disabled: its tools leave the page.
  await page.goto("/mcp");
  await ready(page);
  await kit.getByRole("button", { name: "Disable" }).click();
  await expect(page.getByRole("status")).toHaveText("Disabled kit.");
  await expect(kit.locator(".mcp-status")).toHaveText("disabled");
  await page.goto("/permissions");
  await ready(page);
  await expect(page.locator('tr[data-function="mcp__kit__echo"]')).toHaveCount(0);
});
