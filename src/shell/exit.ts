/** How a shell command ends: its exit code, and a line for stderr. */

export const EXIT = {
  ok: 0,
  /** The service refused (its error code and suggestion go to stderr), a job failed, `work --once`'s command failed, or anything else went wrong. */
  refused: 1,
  /** Bad usage, or a local file that cannot be read or written. */
  usage: 2,
  unreachable: 3,
  /** A wait ran out before the awaited thing happened (result, job). */
  waitEnded: 4,
  /** `work`: the command exists but cannot be run (as a shell answers). */
  cannotRun: 126,
  /** `work`: no such command (as a shell answers). */
  notFound: 127,
  /** `work`: a second Ctrl-C stopped the command (128 + SIGINT, what a shell reports for a job Ctrl-C ended). */
  interrupted: 130,
} as const;

/** Ends a command with an exit code (and a line for stderr). */
export class Exit extends Error {
  constructor(
    readonly code: number,
    message = "",
  ) {
    super(message);
  }
}
