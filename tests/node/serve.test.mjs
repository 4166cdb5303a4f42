// kvrt serve through the official openai client (and plain fetch where the wire format
// itself is the point): chat and completions, streaming and not, stop strings,
// max_tokens, seeds, errors, the API key, the full queue, disconnects, shutdown.
//   KVRT_CLI=build/kvrt node --test tests/node/serve.test.mjs
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { metric, startServer, until } from "./serve_fixture.mjs";

const user = (content) => [{ role: "user", content }];

describe("kvrt serve", () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new OpenAI({ baseURL: server.baseURL, apiKey: "unused", maxRetries: 0 });
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, "a clean exit on SIGTERM");
  });

  test("lists its model and answers /health", async () => {
    const models = await client.models.list();
    assert.deepEqual(models.data.map((m) => m.id), ["fortune"]);
    assert.equal((await fetch(`http://127.0.0.1:${server.port}/health`)).status, 200);
  });

  test("chat completion, whole and streamed, say the same (greedy)", async () => {
    const request = { model: "fortune", messages: user("Tell me a fortune."), max_tokens: 12,
                      temperature: 0 };
    const whole = await client.chat.completions.create(request);
    const text = whole.choices[0].message.content;
    assert.equal(whole.object, "chat.completion");
    assert.equal(typeof text, "string");
    assert.ok(["stop", "length"].includes(whole.choices[0].finish_reason));
    assert.ok(whole.usage.prompt_tokens > 0);
    assert.equal(whole.usage.total_tokens, whole.usage.prompt_tokens + whole.usage.completion_tokens);

    const stream = await client.chat.completions.create({ ...request, stream: true,
                                                          stream_options: { include_usage: true } });
    let streamed = "";
    let finish = null;
    let usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        streamed += choice.delta.content ?? "";
        finish = choice.finish_reason ?? finish;
      }
    }
    assert.equal(streamed, text);
    assert.equal(finish, whole.choices[0].finish_reason);
    assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
    // The identical conversation again: all but its last prompt token come from the cache.
    assert.equal(usage.prompt_tokens_details.cached_tokens, usage.prompt_tokens - 1);
  });

  test("text completion, whole and streamed as server-sent events ending with [DONE]", async () => {
    const whole = await client.completions.create({ model: "fortune", prompt: "A computer",
                                                    max_tokens: 10, temperature: 0 });
    assert.equal(whole.object, "text_completion");
    const response = await fetch(`${server.baseURL}/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt: "A computer", max_tokens: 10, temperature: 0, stream: true }),
    });
    assert.equal(response.status, 200);
    assert.match(response.headers.get("content-type"), /^text\/event-stream/);
    const body = await response.text();
    const events = body.split("\n\n").filter((e) => e.length > 0);
    assert.equal(events.at(-1), "data: [DONE]");
    let text = "";
    for (const event of events.slice(0, -1)) {
      assert.match(event, /^data: \{/);
      text += JSON.parse(event.slice(6)).choices[0].text;
    }
    assert.equal(text, whole.choices[0].text);
  });

  test("max_tokens bounds the reply and says 'length'", async () => {
    const result = await client.completions.create({ prompt: "The", max_tokens: 3,
                                                     temperature: 0, ignore_eos: true });
    assert.equal(result.usage.completion_tokens, 3);
    assert.equal(result.choices[0].finish_reason, "length");
  });

  test("a stop string ends the text right before it", async () => {
    const base = await client.completions.create({ prompt: "Once upon a time", max_tokens: 24,
                                                   temperature: 0, ignore_eos: true });
    const text = base.choices[0].text;
    assert.ok(text.length > 8, `long enough to cut: ${JSON.stringify(text)}`);
    const stop = text.slice(5, 8);
    const cut = await client.completions.create({ prompt: "Once upon a time", max_tokens: 24,
                                                  temperature: 0, ignore_eos: true,
                                                  stop: [stop, "never-there"] });
    assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
    assert.equal(cut.choices[0].finish_reason, "stop");
  });

  test("the same seed with temperature > 0 gives the same text", async () => {
    const request = { prompt: "Fortune:", max_tokens: 16, temperature: 1.0, top_p: 0.95,
                      ignore_eos: true };
    const texts = [];
    for (const seed of [7, 7, 8, 9]) {
      texts.push((await client.completions.create({ ...request, seed })).choices[0].text);
    }
    assert.equal(texts[0], texts[1]);
    assert.ok(texts[2] !== texts[0] || texts[3] !== texts[0], "other seeds, other draws");
  });

  test("bad requests are 400 naming the field; a refused conversation 422; unknown models 404", async () => {
    const cases = [
      [{ messages: user("x"), n: 2 }, "n"],
      [{ messages: user("x"), temperature: 9 }, "temperature"],
      [{ messages: user("x"), presence_penalty: 1 }, "presence_penalty"],
      [{ messages: [] }, "messages"],
      [{ messages: user("x"), max_tokens: 0 }, "max_tokens"],
    ];
    for (const [body, param] of cases) {
      await assert.rejects(client.chat.completions.create({ model: "fortune", ...body }),
                           (error) => error instanceof OpenAI.BadRequestError && error.param === param &&
                                      error.message.includes(param));
    }
    await assert.rejects(client.completions.create({ model: "fortune", prompt: "x".repeat(20000) }),
                         (error) => error.status === 400 && error.code === "context_length_exceeded");
    await assert.rejects(
      client.chat.completions.create({ messages: [{ role: "assistant", content: "Hi" }] }),
      (error) => error instanceof OpenAI.UnprocessableEntityError &&
                 /must not open with the assistant/.test(error.message));
    await assert.rejects(client.chat.completions.create({ model: "gpt-4o", messages: user("x") }),
                         (error) => error instanceof OpenAI.NotFoundError && error.param === "model");
  });
});

describe("kvrt serve options", () => {
  test("--api-key: requests without the key are 401", async () => {
    const server = await startServer(["--api-key", "sesame"]);
    try {
      const wrong = new OpenAI({ baseURL: server.baseURL, apiKey: "open", maxRetries: 0 });
      await assert.rejects(wrong.models.list(), (error) => error instanceof OpenAI.AuthenticationError);
      const right = new OpenAI({ baseURL: server.baseURL, apiKey: "sesame", maxRetries: 0 });
      assert.equal((await right.models.list()).data[0].id, "fortune");
    } finally {
      await server.stop();
    }
  });

  test("a model without a chat template refuses chat, saying how to give one", async () => {
    const server = await startServer([], { template: false });
    try {
      const client = new OpenAI({ baseURL: server.baseURL, apiKey: "x", maxRetries: 0 });
      await assert.rejects(client.chat.completions.create({ model: "fortune", messages: user("hi") }),
                           (error) => error.status === 400 && /--chat-template/.test(error.message));
      const completion = await client.completions.create({ prompt: "Hi", max_tokens: 2 });
      assert.equal(completion.object, "text_completion");
    } finally {
      await server.stop();
    }
  });

  test("full queue: 503 with Retry-After; a client that leaves frees the model", async () => {
    const server = await startServer(["--queue", "1"]);
    const url = `${server.baseURL}/completions`;
    const post = (body, signal) => fetch(url, { method: "POST", signal,
      headers: { "Content-Type": "application/json" }, body: JSON.stringify(body) });
    try {
      // A: a long stream, running once its first event has arrived.
      const abort = new AbortController();
      const a = await post({ prompt: "A", max_tokens: 100000, ignore_eos: true, stream: true },
                           abort.signal);
      const reader = a.body.getReader();
      await reader.read();
      // B and C arrive together while A runs: one waits (the queue holds 1), the other
      // is refused at once, whichever came second.
      const [b, c] = [post({ prompt: "B", max_tokens: 4, temperature: 0 }),
                      post({ prompt: "C", max_tokens: 4, temperature: 0 })];
      const refused = await Promise.race([b, c]);
      assert.equal(refused.status, 503);
      assert.equal(refused.headers.get("retry-after"), "1");
      assert.equal((await refused.json()).error.code, "queue_full");
      assert.equal(await metric(server.port, "kvrt_queue_length"), 1);
      // A's client leaves: its generation is cancelled and B runs.
      abort.abort();
      const waited = (await b) === refused ? await c : await b;
      assert.equal(waited.status, 200);
      assert.ok((await waited.json()).usage.completion_tokens > 0);
      assert.ok(await until(async () => (await metric(server.port, "kvrt_cancelled_requests_total")) >= 1));
    } finally {
      const { code } = await server.stop();
      assert.equal(code, 0);
    }
  });

  test("SIGTERM during a stream ends it with an error event (or its end) and [DONE], and exits", async () => {
    const server = await startServer();
    const response = await fetch(`${server.baseURL}/completions`, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ prompt: "A", max_tokens: 100000, ignore_eos: true, stream: true }),
    });
    const reader = response.body.getReader();
    await reader.read();
    const stopped = server.stop();
    let body = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      body += decoder.decode(value, { stream: true });
    }
    // Either the stream was cut by the shutdown and says so with an error event, or it
    // had already finished (a fast machine generates the 510 tokens the context allows
    // before the signal lands): never a stream that just stops.
    assert.ok(body.endsWith("data: [DONE]\n\n"), body.slice(-300));
    const finished = /"finish_reason":"length"/.test(body);
    const cut = /data: \{"error":\{[^\n]*"shutting_down"/.test(body);
    assert.ok(finished !== cut, `finished ${finished}, cut ${cut}: ${body.slice(-300)}`);
    console.log(`the stream was ${cut ? "cut by the shutdown" : "finished before it"}`);
    assert.equal((await stopped).code, 0);
  });
});
