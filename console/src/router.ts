/**
 * Pages live in the URL's fragment (#/channels/<id>), so the service serves
 * one document for all of them and a reload or a shared link lands on the
 * same page. Nothing secret ever goes in it.
 */
import { useEffect, useState } from "preact/hooks";

export type Route =
  | { page: "channels" }
  | { page: "discover" }
  | { page: "pdf" }
  | { page: "limits" }
  | { page: "approvals" }
  | { page: "channel"; id: string; tab: ChannelTab }
  | { page: "invitation"; id: string };

export type ChannelTab = "messages" | "settings" | "people" | "deliveries" | "schedules";
const TABS: readonly ChannelTab[] = ["messages", "settings", "people", "deliveries", "schedules"];

export function parseRoute(hash: string): Route {
  const parts = hash.replace(/^#\/?/, "").split("/").filter((p) => p !== "").map(decodeURIComponent);
  const [first, second, third] = parts;
  if (first === "channels" && second) return { page: "channel", id: second, tab: TABS.find((t) => t === third) ?? "messages" };
  if (first === "invitations" && second) return { page: "invitation", id: second };
  if (first === "discover") return { page: "discover" };
  if (first === "pdf") return { page: "pdf" };
  if (first === "limits") return { page: "limits" };
  if (first === "approvals") return { page: "approvals" };
  return { page: "channels" };
}

export function navigate(path: string): void {
  location.hash = `#${path}`;
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onChange = () => setRoute(parseRoute(location.hash));
    addEventListener("hashchange", onChange);
    return () => removeEventListener("hashchange", onChange);
  }, []);
  return route;
}
