/** The agentbus TypeScript client for Node: typed service clients plus the worker and follower loops and call(). */
export * from "./shared.js";
export { createClient } from "./client.js";
