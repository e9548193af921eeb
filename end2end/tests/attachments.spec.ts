import { test, expect } from "@playwright/test";
import { mock, mockSays, mockSession, send, signIn } from "./helpers";

// Files attached from the composer: picked, uploaded as chips, sent with the message, and
// in the mock LLM's request as the provider takes them (the text in the user's turn, the
// image as an image block); the message shows them as chips that download them; a file
// Hero does not read is refused with its reason under the box.
test.describe.configure({ mode: "serial" });

// A 1×1 PNG.
const PNG = Buffer.from(
  "89504E470D0A1A0A0000000D49484452000000010000000108060000001F15C4890000000D49444154789C63F8CFC0F01F0005000100FF89993D1D0000000049454E44AE426082",
  "hex",
);

test("a text file and an image reach the agent, and the message shows them", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, `Attach ${Date.now()}`);
  await page.locator("[data-attach]").setInputFiles([
    { name: "plan.md", mimeType: "text/markdown", buffer: Buffer.from("# Plan\n\n- pack the tent\n") },
    { name: "dot.png", mimeType: "image/png", buffer: PNG },
  ]);
  const chips = page.locator("[data-attached] .attachment-chip");
  await expect(chips).toHaveCount(2);
  await expect(page.locator("[data-attached] [data-attachment-id]")).toHaveCount(2);
  await send(page, `What is in these? ${mockSays("A plan and a dot.")}`);
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("A plan and a dot.");
  await expect(chips).toHaveCount(0);

  // The mock was sent both, as Anthropic's API takes them.
  const requests = await (await page.request.get(`${mock}/mock/requests`)).json();
  const last = requests[requests.length - 1].body;
  const turn = last.messages[last.messages.length - 1];
  const image = turn.content.find((b: any) => b.type === "image");
  expect(image.source.media_type).toBe("image/png");
  expect(image.source.data).toBe(PNG.toString("base64"));
  const text = turn.content.find((b: any) => b.type === "text").text;
  expect(text).toContain('<attachment name="plan.md" type="text/markdown">');
  expect(text).toContain("- pack the tent");

  // The message carries them as chips; one downloads the file as it was.
  const carried = page.locator(".msg-user").last().getByTestId("attachments");
  await expect(carried.locator(".attachment-chip")).toHaveText([/plan\.md · 24 B/, /dot\.png · 71 B/]);
  const [download] = await Promise.all([page.waitForEvent("download"), carried.getByText(/plan\.md/).click()]);
  expect(download.suggestedFilename()).toBe("plan.md");
});

test("a file Hero does not read is refused with its reason", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, `Refused ${Date.now()}`);
  await page.locator("[data-attach]").setInputFiles([
    { name: "tool.exe", mimeType: "application/octet-stream", buffer: Buffer.from([0x4d, 0x5a, 0x90, 0x00, 0x03]) },
  ]);
  await expect(page.getByRole("alert").filter({ hasText: "tool.exe is not a file Hero reads" })).toBeVisible();
  await expect(page.locator("[data-attached] .attachment-chip")).toHaveCount(0);
});

test("a file dropped on the composer is attached as one picked", async ({ page }) => {
  await signIn(page, "carol", "carol-password");
  await mockSession(page, `Dropped ${Date.now()}`);
  // A drop as the browser makes it: a DataTransfer holding the file, on the composer.
  const dropped = await page.evaluateHandle(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(["a,b\n1,2\n"], "table.csv", { type: "text/csv" }));
    return dt;
  });
  const composer = page.locator("form.composer");
  await composer.dispatchEvent("dragover", { dataTransfer: dropped });
  await composer.dispatchEvent("drop", { dataTransfer: dropped });
  await expect(page.locator("[data-attached] .attachment-chip")).toHaveText([/table\.csv/]);
  await send(page, `And this? ${mockSays("A table.")}`);
  await expect(page.locator(".msg-agent:not(.live)").last()).toContainText("A table.");
  const requests = await (await page.request.get(`${mock}/mock/requests`)).json();
  const last = requests[requests.length - 1].body;
  const turn = last.messages[last.messages.length - 1];
  const text = typeof turn.content === "string" ? turn.content : turn.content.find((b: any) => b.type === "text").text;
  expect(text).toContain('<attachment name="table.csv" type="text/csv">\na,b\n1,2\n');
});
