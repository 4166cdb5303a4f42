// Starts `kvrt serve` on the bundled model on a free loopback port (--port 0; the port
// is read from the "listening on" line) and stops it. KVRT_CLI names the binary,
// KVRT_SOURCE_DIR the source tree (both set by CTest).
import { spawn } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const sourceDir = process.env.KVRT_SOURCE_DIR ?? new URL("../..", import.meta.url).pathname;
const cli = process.env.KVRT_CLI ?? join(sourceDir, "build/kvrt");
// One export cache for every server of a run: the model is exported once.
const cacheDir = mkdtempSync(join(tmpdir(), "kvrt-serve-test-"));

export async function startServer(extraArgs = [], { template = true } = {}) {
  const args = ["serve", join(sourceDir, "models/fortune-llama"), "--port", "0", "--device", "cpu",
                "--threads", "1", "--model-name", "fortune", ...extraArgs];
  if (template) args.push("--chat-template", join(sourceDir, "tests/fixtures/serve/chat.jinja"));
  const child = spawn(cli, args, { env: { ...process.env, XDG_CACHE_HOME: cacheDir },
                                   stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  const port = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no 'listening' line in 60 s:\n${stderr}`)), 60000);
    child.stderr.on("data", (data) => {
      stderr += data;
      const match = /listening on http:\/\/127\.0\.0\.1:(\d+)/.exec(stderr);
      if (match) { clearTimeout(timer); resolve(Number(match[1])); }
    });
    child.on("exit", (code) => { clearTimeout(timer); reject(new Error(`exited ${code}:\n${stderr}`)); });
  });
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  return {
    port,
    pid: child.pid,
    baseURL: `http://127.0.0.1:${port}/v1`,
    stderr: () => stderr,
    // SIGTERM, then the exit status; SIGKILL if it has not exited in `ms`.
    async stop(ms = 10000) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), ms);
      const result = await exited;
      clearTimeout(killer);
      return result;
    },
  };
}

export function rssKiB(pid) {
  const match = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
  return match ? Number(match[1]) : NaN;
}

export async function metric(port, name) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const match = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
  return match ? Number(match[1]) : NaN;
}

export async function until(condition, ms = 10000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await condition()) return true;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return false;
}
