/**
 * Where the shell commands find the service and the key: flags, then the
 * environment (AGENTBUS_URL, AGENTBUS_API_KEY), then the profile file that
 * `agentbus login` writes (AGENTBUS_PROFILE, default
 * ~/.config/agentbus/profile.json, mode 0600: it holds a secret).
 */
import { chmod, mkdir, readFile, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import path from "node:path";

export interface Profile {
  url: string;
  key?: string | undefined;
}

export const DEFAULT_URL = "http://127.0.0.1:8080";

export function profilePath(env: NodeJS.ProcessEnv): string {
  return env.AGENTBUS_PROFILE?.trim() || path.join(env.XDG_CONFIG_HOME?.trim() || path.join(homedir(), ".config"), "agentbus", "profile.json");
}

export async function readProfile(env: NodeJS.ProcessEnv): Promise<Partial<Profile>> {
  try {
    const parsed = JSON.parse(await readFile(profilePath(env), "utf8")) as { url?: unknown; key?: unknown };
    return { url: typeof parsed.url === "string" ? parsed.url : undefined, key: typeof parsed.key === "string" ? parsed.key : undefined };
  } catch {
    return {};
  }
}

export async function writeProfile(env: NodeJS.ProcessEnv, profile: Profile): Promise<string> {
  const file = profilePath(env);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeFile(file, `${JSON.stringify(profile, null, 2)}\n`, { mode: 0o600 });
  // writeFile keeps an existing file's mode.
  await chmod(file, 0o600);
  return file;
}

export async function resolveProfile(env: NodeJS.ProcessEnv, flags: { url?: string | undefined; key?: string | undefined }): Promise<Profile> {
  const saved = await readProfile(env);
  return {
    url: flags.url ?? (env.AGENTBUS_URL?.trim() || undefined) ?? saved.url ?? DEFAULT_URL,
    key: flags.key ?? (env.AGENTBUS_API_KEY?.trim() || undefined) ?? saved.key,
  };
}
