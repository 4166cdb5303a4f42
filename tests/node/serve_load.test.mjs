// A bounded load test of kvrt serve on 127.0.0.1: 16 concurrent clients for about
// 10 s (autocannon) against /v1/completions, with a queue smaller than the number of
// clients so that some requests are refused. Every response must be a complete, valid
// completion or a clean 503; the server must not crash, its memory must stay put, and
// the queue must drain. Prints the figures as one JSON line ("load: {...}").
import assert from "node:assert/strict";
import { test } from "node:test";
import autocannon from "autocannon";
import { metric, rssKiB, startServer, until } from "./serve_fixture.mjs";

const connections = Number(process.env.KVRT_LOAD_CONNECTIONS ?? 16);
const duration = Number(process.env.KVRT_LOAD_SECONDS ?? 10);
// How much RSS may grow (KiB); sanitizer builds set more (their allocator's quarantine).
const rssSlackKiB = Number(process.env.KVRT_RSS_SLACK_KIB ?? 32768);

test("16 clients for 10 s: valid answers or clean 503s, stable memory, a drained queue", async () => {
  const server = await startServer(["--queue", "8"]);
  try {
    const body = JSON.stringify({ model: "fortune", prompt: "Fortune:", max_tokens: 8,
                                  temperature: 0.7, top_p: 0.9 });
    const post = () => fetch(`${server.baseURL}/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" }, body });
    for (let i = 0; i < 20; ++i) await (await post()).text();  // warm up before measuring
    const rssBefore = rssKiB(server.pid);

    let valid = 0;
    let refused = 0;
    const invalid = [];
    const result = await autocannon({
      url: `${server.baseURL}/completions`,
      connections,
      duration,
      timeout: 30,
      requests: [{
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
        onResponse: (status, text) => {
          try {
            const json = JSON.parse(text);
            if (status === 200 && typeof json.choices[0].text === "string" &&
                ["stop", "length"].includes(json.choices[0].finish_reason) &&
                json.usage.completion_tokens >= 1 && json.usage.completion_tokens <= 8) {
              ++valid;
            } else if (status === 503 && json.error.code === "queue_full") {
              ++refused;
            } else {
              invalid.push(`${status} ${text.slice(0, 200)}`);
            }
          } catch {
            invalid.push(`${status} unparsable: ${text.slice(0, 200)}`);
          }
        },
      }],
    });
    const drained = await until(async () => (await metric(server.port, "kvrt_queue_length")) === 0 &&
                                            (await metric(server.port, "kvrt_requests_running")) === 0);
    const rssAfter = rssKiB(server.pid);
    const figures = {
      connections, duration_s: duration, requests: result.requests.total, valid, refused_503: refused,
      invalid: invalid.length, errors: result.errors, timeouts: result.timeouts,
      latency_ms: { p50: result.latency.p50, p99: result.latency.p99, max: result.latency.max },
      rss_kib: { before: rssBefore, after: rssAfter },
    };
    console.log(`load: ${JSON.stringify(figures)}`);
    assert.deepEqual(invalid, []);
    assert.equal(result.errors, 0);
    assert.equal(result.timeouts, 0);
    assert.ok(valid > 0);
    assert.equal(valid + refused, result.requests.total);
    assert.ok(drained, "the queue drains");
    // Memory is steady: nothing per request is kept (a leak of even 1 KiB per request
    // over thousands of requests would show).
    assert.ok(rssAfter - rssBefore < rssSlackKiB, `RSS grew by ${rssAfter - rssBefore} KiB`);
    assert.equal((await fetch(`http://127.0.0.1:${server.port}/health`)).status, 200);
  } finally {
    const { code } = await server.stop();
    assert.equal(code, 0);
  }
});
