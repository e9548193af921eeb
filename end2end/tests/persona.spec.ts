import { test, expect } from "@playwright/test";
import { connected, createSession, ready, send, signIn } from "./helpers";

// Agents with a persona: the offline demo's first-run ritual (Frank's first conversation),
// and a context file edited on the Files page, then seen in "View system prompt".
test.describe.configure({ mode: "serial" });

async function demoId(page: import("@playwright/test").Page): Promise<number> {
  const agents = await (await page.request.get("/api/agents")).json();
  return agents.find((a: any) => a.provider === "scripted").id;
}

test("the demo agent's first-run ritual asks, writes USER.md, and never repeats", async ({ page }) => {
  await signIn(page, "frank", "frank-password", { ritual: true });
  await createSession(page, "First run");
  await connected(page);
  // The prompt it is given says so.
  await page.getByRole("button", { name: "View system prompt" }).click();
  await expect(page.getByTestId("system-prompt")).toContainText("## First run");
  await page.getByRole("button", { name: "Hide system prompt" }).click();
  await send(page, "Hello there");
  await expect(page.locator('.msg-agent:not(.live) [data-hml="ask"]').last()).toHaveClass(/asking/, { timeout: 15_000 });
  await expect(page.getByTestId("answering")).toBeVisible();
  await expect(page.locator('.msg-agent:not(.live) [data-hml="ask"]').last()).toContainText("What should I call you");
  await send(page, "Frank, UTC please");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("the ritual is over for good", { timeout: 20_000 });
  await page.getByRole("button", { name: "View system prompt" }).click();
  const prompt = page.getByTestId("system-prompt");
  await expect(prompt).toContainText("In their words: Frank, UTC please");
  await expect(prompt).not.toContainText("## First run");
  // The Files page shows USER.md, and BOOTSTRAP.md is gone.
  await page.goto(`/agents/${await demoId(page)}/files`);
  await ready(page);
  await expect(page.locator('li[data-file="BOOTSTRAP.md"]')).toContainText("empty");
  await page.locator('li[data-file="USER.md"] button').click();
  await expect(page.getByLabel("Content of USER.md")).toHaveValue(/Frank, UTC please/);
  // A new message gets the showcase, not the ritual.
  await page.goto("/");
  await ready(page);
  await createSession(page, "After");
  await connected(page);
  await send(page, "Hello again");
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("offline demo", { timeout: 15_000 });
  await expect(page.locator('.msg-agent:not(.live) [data-hml="todo"]').last()).toBeVisible();
});

test("a context file edited on the Files page is what the agent is told", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  const demo = await demoId(page);
  await page.goto(`/agents/${demo}/files`);
  await ready(page);
  await page.locator('li[data-file="SOUL.md"] button').click();
  const box = page.getByLabel("Content of SOUL.md");
  await expect(box).toHaveValue(/curious, careful and kind/);
  await expect(page.getByTestId("level-note")).toContainText("Your own copy");
  await box.fill("You are **Captain Test**, who answers in rhyme.");
  await expect(page.locator(".file-preview strong")).toHaveText("Captain Test");
  await page.getByRole("button", { name: "Save" }).click();
  await expect(page.getByRole("status")).toHaveText("Saved SOUL.md");
  // The virtual file is shown but cannot be edited.
  await page.locator('li[data-file="AVAILABILITY.md"] button').click();
  await expect(page.getByTestId("level-note")).toContainText("cannot be edited");
  await expect(page.getByRole("button", { name: "Save" })).toBeDisabled();
  // In a chat with the agent, "View system prompt" shows it.
  await page.goto("/");
  await ready(page);
  await createSession(page, "Persona");
  await connected(page);
  await page.getByRole("button", { name: "View system prompt" }).click();
  await expect(page.getByTestId("system-prompt")).toContainText('<context_file name="SOUL.md">\nYou are **Captain Test**, who answers in rhyme.');
  await expect(page.getByTestId("system-prompt")).toContainText("## Tooling");
});

test("an agent summoned from a description gets its persona, or the templates when the reply is bad", async ({ page }) => {
  await signIn(page, "dave", "dave-password");
  await page.goto("/agents");
  await ready(page);
  const files = [
    '<file name="SOUL.md">You are a **sarcastic Rust reviewer**.</file>',
    '<file name="IDENTITY.md">- Name: Ferris the Critic</file>',
    '<file name="AGENTS.md">Review code line by line.</file>',
    '<file name="TOOLS.md">Run cargo clippy.</file>',
  ].join("\n");
  const mock = process.env.HERO_E2E_MOCK ?? "http://127.0.0.1:3211";
  const form = page.locator("form.new-agent");
  await form.getByLabel("Name").fill("Ferris");
  await form.getByLabel("Type").selectOption("predefined");
  await form.getByLabel("Model").fill("mock-model");
  await form.getByLabel("Base URL").fill(mock);
  await form.getByLabel("API key").fill("e2e-key-123456");
  await form.getByLabel("Describe it").fill(`a sarcastic Rust reviewer [[mock chunk=16 delay_ms=40 text=${JSON.stringify(files)}]]`);
  await form.getByRole("button", { name: "Add agent" }).click();
  const card = page.locator(".agent-card", { hasText: "Ferris" });
  await expect(card.getByTestId("agent-status")).toHaveText("ready: written from the description", { timeout: 20_000 });
  await expect(card.locator(".agent-type")).toHaveText("predefined");
  // Its files say so, at the agent's own level.
  await card.getByRole("link", { name: "Files" }).click();
  await ready(page);
  await page.locator('li[data-file="SOUL.md"] button').click();
  await expect(page.getByLabel("Content of SOUL.md")).toHaveValue(/sarcastic Rust reviewer/);
  await expect(page.getByTestId("level-note")).toContainText("The agent's own file");
  // "Edit with AI" with a reply that holds no files: nothing is written, nothing is lost.
  await page.goto("/agents");
  await ready(page);
  const again = page.locator(".agent-card", { hasText: "Ferris" });
  await again.getByLabel("Edit with AI").fill('a gardener [[mock text="Sure! Here you go."]]');
  await again.getByRole("button", { name: "Rewrite its persona" }).click();
  await expect(again.getByTestId("agent-status")).toHaveText("ready: its files stay as they were: the reply has no SOUL.md", { timeout: 20_000 });
  const soul = await (await page.request.get(`/api/agents/${await again.getAttribute("data-agent-id")}/files/SOUL.md`)).json();
  expect(soul.content).toContain("sarcastic Rust reviewer");
});
