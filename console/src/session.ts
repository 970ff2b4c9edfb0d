/** The signed-in key as every view sees it, and the hooks that call the API with it. */
import { createContext } from "preact";
import { useCallback, useContext, useEffect, useRef, useState } from "preact/hooks";
import type { KeyInfo } from "../../gen/agentbus/v1/key_pb.js";
import { problemOf, type AgentbusClient, type Problem } from "./api.js";

export interface Session {
  client: AgentbusClient;
  me: KeyInfo;
  signOut: () => void;
}

export const SessionContext = createContext<Session | undefined>(undefined);

export function useSession(): Session {
  const session = useContext(SessionContext);
  if (session === undefined) throw new Error("useSession outside a signed-in page");
  return session;
}

/**
 * Runs an action a person started; `busy` while it runs and the problem it
 * ended with, if any. A second click while busy is ignored.
 */
export function useAction<A extends unknown[]>(action: (...args: A) => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const running = useRef(false);
  const run = useCallback(
    async (...args: A) => {
      if (running.current) return;
      running.current = true;
      setBusy(true);
      setProblem(undefined);
      try {
        await action(...args);
      } catch (err) {
        setProblem(problemOf(err));
      } finally {
        running.current = false;
        setBusy(false);
      }
    },
    [action],
  );
  return { run, busy, problem, clearProblem: () => setProblem(undefined) };
}

/**
 * Loads `load` when `deps` change and again every `refreshMs` (0: once);
 * `reload` loads at once. The last good value stays while a refresh fails.
 */
export function useLoaded<T>(load: () => Promise<T>, deps: unknown[], refreshMs = 0) {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [generation, setGeneration] = useState(0);
  useEffect(() => {
    let live = true;
    const fetchOnce = async () => {
      try {
        const next = await load();
        if (!live) return;
        setValue(next);
        setProblem(undefined);
      } catch (err) {
        if (live) setProblem(problemOf(err));
      }
    };
    void fetchOnce();
    const timer = refreshMs > 0 ? setInterval(() => void fetchOnce(), refreshMs) : undefined;
    return () => {
      live = false;
      if (timer !== undefined) clearInterval(timer);
    };
    // `load` is a new closure each render; `deps` say when it means something new.
  }, [...deps, generation]);
  return { value, problem, reload: () => setGeneration((g) => g + 1) };
}

/** One page of a listing with next_cursor. */
export interface Page<T> {
  data: T[];
  nextCursor?: string;
}

/**
 * A paged listing: the first page when `deps` change, then more on request.
 * `items` are every page's, in order; `hasMore` while the last page had a
 * next_cursor.
 */
export function usePages<T>(load: (cursor: string | undefined) => Promise<Page<T>>, deps: unknown[]) {
  const [pages, setPages] = useState<Page<T>[]>([]);
  const first = useLoaded(async () => {
    const page = await load(undefined);
    setPages([page]);
    return true;
  }, deps);
  const more = useAction(async () => {
    const page = await load(pages.at(-1)?.nextCursor);
    setPages([...pages, page]);
  });
  return {
    items: pages.flatMap((p) => p.data),
    loaded: first.value !== undefined,
    problem: first.problem ?? more.problem,
    hasMore: pages.at(-1)?.nextCursor !== undefined,
    more,
  };
}
