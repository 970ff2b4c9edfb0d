/**
 * A remote A2A agent on 127.0.0.1 for the forwarder's tests, built on
 * @a2a-js/sdk's own server (DefaultRequestHandler, InMemoryTaskStore,
 * JsonRpcTransportHandler) behind node:http. Its behaviour per message is
 * the test's `answer`; it records every request's headers and every message.
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { A2A_PROTOCOL_VERSION, AgentCard, Role, TaskState, type Message, type Part } from "@a2a-js/sdk";
import { AgentEvent, DefaultRequestHandler, InMemoryTaskStore, JsonRpcTransportHandler, ServerCallContext, type AgentExecutor } from "@a2a-js/sdk/server";

/** What the agent does with a message: complete with parts, fail, or hold it working until released. */
export type Answer = { complete: Part[] } | { fail: string } | { hold: Promise<Part[]> };

const text = (value: string): Part => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });

export class FakeA2aAgent {
  readonly messages: Message[] = [];
  readonly requests: Array<{ method: string; path: string; headers: http.IncomingHttpHeaders }> = [];
  readonly cancelled: string[] = [];
  answer: (message: Message) => Answer = (m) => ({ complete: [text(`DONE: ${m.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("")}`)] });

  private constructor(private readonly server: http.Server) {}

  static async start(): Promise<FakeA2aAgent> {
    const server = http.createServer();
    const agent = new FakeA2aAgent(server);
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const card = (): AgentCard => ({
      name: "Stand-in",
      description: "A remote agent for tests",
      supportedInterfaces: [{ url: `${agent.url}/rpc`, protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION }],
      provider: undefined,
      version: "1",
      capabilities: { streaming: false, pushNotifications: false, extensions: [], extendedAgentCard: false },
      securitySchemes: {},
      securityRequirements: [],
      defaultInputModes: ["text/plain"],
      defaultOutputModes: ["text/plain"],
      skills: [{ id: "echo", name: "Echo", description: "Answers", tags: [], examples: [], inputModes: [], outputModes: [], securityRequirements: [] }],
      signatures: [],
    });
    const executor: AgentExecutor = {
      execute: async (ctx, bus) => {
        agent.messages.push(ctx.userMessage);
        const answer = agent.answer(ctx.userMessage);
        const status = (state: TaskState, parts: Part[] = []) => ({
          state,
          message: parts.length === 0 ? undefined : { messageId: `${ctx.taskId}-s`, contextId: ctx.contextId, taskId: ctx.taskId, role: Role.ROLE_AGENT, parts, metadata: undefined, extensions: [], referenceTaskIds: [] },
          timestamp: new Date().toISOString(),
        });
        bus.publish(AgentEvent.task({ id: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_WORKING), artifacts: [], history: [ctx.userMessage], metadata: undefined }));
        let parts: Part[];
        if ("fail" in answer) {
          bus.publish(AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_FAILED, [text(answer.fail)]), metadata: undefined }));
          bus.finished();
          return;
        }
        if ("hold" in answer) parts = await answer.hold;
        else parts = answer.complete;
        bus.publish(AgentEvent.artifactUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, artifact: { artifactId: "a1", name: "answer", description: "", parts, metadata: undefined, extensions: [] }, append: false, lastChunk: true, metadata: undefined }));
        bus.publish(AgentEvent.statusUpdate({ taskId: ctx.taskId, contextId: ctx.contextId, status: status(TaskState.TASK_STATE_COMPLETED), metadata: undefined }));
        bus.finished();
      },
      cancelTask: async (taskId, bus) => {
        agent.cancelled.push(taskId);
        bus.publish(AgentEvent.statusUpdate({ taskId, contextId: "", status: { state: TaskState.TASK_STATE_CANCELED, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }));
        bus.finished();
      },
    };
    const handler = new JsonRpcTransportHandler(new DefaultRequestHandler(card(), new InMemoryTaskStore(), executor));
    server.on("request", (req, res) => {
      agent.requests.push({ method: req.method ?? "", path: req.url ?? "", headers: req.headers });
      if (req.method === "GET" && req.url === "/.well-known/agent-card.json") {
        res.writeHead(200, { "Content-Type": "application/json" });
        res.end(JSON.stringify(AgentCard.toJSON(card())));
        return;
      }
      const chunks: Buffer[] = [];
      req.on("data", (c: Buffer) => chunks.push(c));
      req.on("end", () => {
        void (async () => {
          const answer = await handler.handle(Buffer.concat(chunks).toString("utf8"), new ServerCallContext({ requestedVersion: A2A_PROTOCOL_VERSION }));
          res.writeHead(200, { "Content-Type": "application/json" });
          res.end(JSON.stringify(answer));
        })();
      });
    });
    return agent;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

export { text };
