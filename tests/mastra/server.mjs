// A real Mastra server for evalcli's `mastra` target: Mastra's own Hono adapter over two agents.
//
//   node server.mjs [--port 0] [--latency 0] [--db :memory:]
//
// It prints `PORT <n>` on stdout once it listens on 127.0.0.1 (port 0: a free one). The agents:
// - `weatherAgent`: a `get_weather` tool (it throws for a city it does not know) and a real Memory on
//   LibSQL, so a thread's earlier turns are in the model's prompt;
// - `forgetfulAgent`: the same model and tool, no Memory.
// Their model is the AI SDK's MockLanguageModelV3, answering only from the messages it is given (never
// from state of its own): a favourite city it was told in an earlier turn can only come back through
// Mastra's memory. It waits `--latency` seconds per call (for the benchmark). Nothing leaves the machine.
import { serve } from "@hono/node-server";
import { Agent } from "@mastra/core/agent";
import { Mastra } from "@mastra/core/mastra";
import { createTool } from "@mastra/core/tools";
import { MastraServer } from "@mastra/hono";
import { LibSQLStore } from "@mastra/libsql";
import { Memory } from "@mastra/memory";
import { MockLanguageModelV3 } from "ai/test";
import { Hono } from "hono";
import { z } from "zod";

function options() {
  const out = { port: 0, latency: 0, db: ":memory:" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const key = argv[i].replace(/^--/, "");
    out[key] = key === "db" ? argv[i + 1] : Number(argv[i + 1]);
  }
  return out;
}

const FORECASTS = {
  brooklyn: { today: ["sunny", 72], tomorrow: ["rainy", 64] },
  london: { today: ["rainy", 54], tomorrow: ["cloudy", 57] },
  paris: { today: ["sunny", 68], tomorrow: ["sunny", 70] },
};
const CITY = /\b(?:in|for)\s+([A-Z][\w-]*)/;
const FAVOURITE = /favou?rite city is\s+([A-Z][\w-]*)/i;

const getWeather = createTool({
  id: "get_weather",
  description: "The forecast for a city, today or tomorrow.",
  inputSchema: z.object({ city: z.string(), day: z.enum(["today", "tomorrow"]).default("today") }),
  execute: async ({ city, day }) => {
    const forecast = FORECASTS[city.toLowerCase()];
    if (!forecast) throw new Error(`Unknown city: ${city}`);
    const [condition, temperature_f] = forecast[day ?? "today"];
    return { city, day: day ?? "today", condition, temperature_f };
  },
});

/** The text of a prompt message (user text parts joined). */
function textOf(message) {
  if (typeof message.content === "string") return message.content;
  return (message.content ?? []).filter((p) => p.type === "text").map((p) => p.text).join(" ");
}

/** What the model says next, given the prompt Mastra built (system, remembered turns, this turn). */
function next(prompt) {
  const last = prompt[prompt.length - 1];
  if (last?.role === "tool") {
    const result = last.content.find((p) => p.type === "tool-result");
    const output = result?.output ?? {};
    if (output.type !== "json") return { text: `Sorry, I could not get that forecast: ${output.value}.` };
    const { city, day, condition, temperature_f } = output.value;
    return { text: `${day === "tomorrow" ? "Tomorrow" : "Today"} in ${city}: ${condition}, ${temperature_f}°F.` };
  }
  const users = prompt.filter((m) => m.role === "user").map(textOf);
  const said = users[users.length - 1] ?? "";
  const favourite = FAVOURITE.exec(said);
  if (favourite) return { text: `Got it, ${favourite[1]} is your favourite city.` };
  let city = CITY.exec(said)?.[1];
  if (/favou?rite/i.test(said)) {
    const named = users.slice(0, -1).map((u) => FAVOURITE.exec(u)?.[1]).filter(Boolean);
    city = named[named.length - 1];
  }
  if (!city) return { text: "Which city do you mean?" };
  const day = /tomorrow/i.test(said) ? "tomorrow" : "today";
  return { call: { city, day } };
}

function mockModel(latency) {
  let calls = 0;
  return new MockLanguageModelV3({
    provider: "evalcli-tests",
    modelId: "scripted-weather",
    doGenerate: async ({ prompt }) => {
      if (latency > 0) await new Promise((resolve) => setTimeout(resolve, latency * 1000));
      const reply = next(prompt);
      const words = prompt.map(textOf).join(" ").split(/\s+/).filter(Boolean).length;
      const usage = {
        inputTokens: { total: words, noCache: words, cacheRead: 0, cacheWrite: 0 },
        outputTokens: { total: 7, text: 7, reasoning: 0 },
      };
      calls += 1;
      if (reply.call) {
        return {
          content: [{ type: "tool-call", toolCallId: `call_${calls}`, toolName: "get_weather",
                      input: JSON.stringify(reply.call) }],
          finishReason: { unified: "tool-calls", raw: "tool_calls" }, usage, warnings: [],
        };
      }
      return { content: [{ type: "text", text: reply.text }], finishReason: { unified: "stop", raw: "stop" },
               usage, warnings: [] };
    },
  });
}

const opts = options();
const storage = new LibSQLStore({ id: "evalcli-tests", url: opts.db });
const instructions = "You answer weather questions with the get_weather tool.";
const weatherAgent = new Agent({
  id: "weatherAgent", name: "Weather Agent", instructions, model: mockModel(opts.latency),
  tools: { get_weather: getWeather },
  memory: new Memory({ storage, options: { lastMessages: 20, semanticRecall: false } }),
});
const forgetfulAgent = new Agent({
  id: "forgetfulAgent", name: "Forgetful Agent", instructions, model: mockModel(opts.latency),
  tools: { get_weather: getWeather },
});
const mastra = new Mastra({ agents: { weatherAgent, forgetfulAgent }, storage, logger: false });

const app = new Hono();
const server = new MastraServer({ app, mastra, prefix: "/api" });
await server.init();

const listener = serve({ fetch: app.fetch, port: opts.port, hostname: "127.0.0.1" }, (info) => {
  process.stdout.write(`PORT ${info.port}\n`);
});
for (const signal of ["SIGTERM", "SIGINT"]) {
  process.on(signal, () => listener.close(() => process.exit(0)));
}
