import { defineConfig } from "@playwright/test";

// Browser tests run Debian's Chromium (no browser download) against the real `hero` binary,
// started by serve-for-tests.sh with a fresh data directory and two users.
const port = Number(process.env.HERO_E2E_PORT ?? 3210);
process.env.HERO_E2E_MOCK = `http://127.0.0.1:${port + 1}`;
// Hero under /hero behind nginx: the proxy that strips the prefix, and the one that does not.
process.env.HERO_E2E_STRIPPING = `http://127.0.0.1:${port + 2}`;
process.env.HERO_E2E_PASSING = `http://127.0.0.1:${port + 3}`;
// Two Heros on one PostgreSQL behind one nginx: balanced, and to each one alone.
process.env.HERO_E2E_BALANCED = `http://127.0.0.1:${port + 5}`;
process.env.HERO_E2E_FIRST = `http://127.0.0.1:${port + 6}`;
process.env.HERO_E2E_SECOND = `http://127.0.0.1:${port + 7}`;

export default defineConfig({
  testDir: "./tests",
  timeout: 30_000,
  expect: { timeout: 10_000 },
  fullyParallel: false,
  workers: 1,
  retries: 0,
  reporter: [["list"]],
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    launchOptions: {
      executablePath: process.env.HERO_CHROMIUM ?? "/usr/bin/chromium",
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    },
    trace: "off",
  },
  webServer: [
    {
      command: `sh ./serve-for-tests.sh ${port}`,
      url: `http://127.0.0.1:${port}/login`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
    },
    {
      // Hero under /hero behind nginx (base-path.spec.ts): a proxy that strips the prefix
      // on port + 2, one that passes it on at port + 3, Hero itself at port + 4.
      command: `sh ./serve-behind-nginx.sh ${port + 2} 127.0.0.1:${port + 1}`,
      url: `http://127.0.0.1:${port + 2}/hero/login`,
      reuseExistingServer: false,
      timeout: 60_000,
      stdout: "pipe",
      stderr: "pipe",
    },
    {
      // Two Heros on one PostgreSQL behind one nginx (instances.spec.ts): the balancer on
      // port + 5, each Hero alone through it on port + 6 and port + 7, the Heros on port + 8
      // and port + 9, their PostgreSQL on port + 10.
      command: `sh ./serve-two-instances.sh ${port + 5} 127.0.0.1:${port + 1}`,
      url: `http://127.0.0.1:${port + 7}/login`,
      reuseExistingServer: false,
      timeout: 90_000,
      stdout: "pipe",
      stderr: "pipe",
    },
    {
      // The repository's mock LLM: agents in the chat tests point at it.
      command: `../target/debug/mock-llm --addr 127.0.0.1:${port + 1}`,
      port: port + 1,
      reuseExistingServer: false,
      timeout: 30_000,
    },
  ],
});
