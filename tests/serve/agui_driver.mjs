// Drives a served AG-UI agent with the official client (@ag-ui/client's HttpAgent), step by step,
// and prints what the client saw as JSON: per run its events, result and error; at the end the
// agent's messages and its pending interrupts.
//
// usage: node agui_driver.mjs <path to @ag-ui/client> '<json plan>'
// plan: {url, token, threadId, steps: [{user: "text"} | {tool: {toolCallId, content}}
//                                      | {run: {tools?, resume?}}]}
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const { HttpAgent } = require(process.argv[2]);
const plan = JSON.parse(process.argv[3]);
const headers = plan.token ? { Authorization: `Bearer ${plan.token}` } : {};
const agent = new HttpAgent({ url: plan.url, headers, threadId: plan.threadId });
const runs = [];
let counter = 0;
for (const step of plan.steps) {
  if (step.user !== undefined) {
    agent.addMessage({ id: `user-${++counter}`, role: "user", content: step.user });
  } else if (step.tool !== undefined) {
    agent.addMessage({ id: `tool-${++counter}`, role: "tool", ...step.tool });
  } else if (step.run !== undefined) {
    const events = [];
    const run = { events };
    try {
      const result = await agent.runAgent(step.run, { onEvent: ({ event }) => { events.push(event); } });
      run.newMessages = result.newMessages;
    } catch (error) {
      run.error = String(error && error.message ? error.message : error);
    }
    run.pendingInterrupts = agent.pendingInterrupts;
    runs.push(run);
  }
}
console.log(JSON.stringify({ runs, messages: agent.messages, pendingInterrupts: agent.pendingInterrupts }));
