/**
 * The REST route table, derived from the google.api.http rules in the
 * descriptors: there is no hand-written list of paths anywhere.
 */
import { getOption, hasOption, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { http, } from "../../../gen/google/api/annotations_pb.js";
import type { HttpRule } from "../../../gen/google/api/http_pb.js";
import { compilePathTemplate, type PathTemplate } from "./path-template.js";

export interface RestRoute {
  httpMethod: string;
  template: PathTemplate;
  /** "" (no body), "*" (the whole request) or the request field the body fills. */
  bodyField: string;
  method: DescMethod;
}

export type RouteMatch =
  | { kind: "route"; route: RestRoute; pathParams: Record<string, string> }
  | { kind: "wrong_method"; allowed: string[] }
  | { kind: "none" };

function bindingsOf(rule: HttpRule): HttpRule[] {
  return [rule, ...rule.additionalBindings];
}

function routeOf(method: DescMethod, rule: HttpRule): RestRoute {
  const { pattern } = rule;
  if (pattern.case === undefined) throw new Error(`${method.parent.typeName}.${method.name}: http rule without a pattern`);
  const [httpMethod, path] =
    pattern.case === "custom" ? [pattern.value.kind.toUpperCase(), pattern.value.path] : [pattern.case.toUpperCase(), pattern.value];
  return { httpMethod, template: compilePathTemplate(path), bodyField: rule.body, method };
}

export class RestRoutes {
  readonly routes: readonly RestRoute[];

  constructor(services: readonly DescService[]) {
    const routes: RestRoute[] = [];
    for (const service of services) {
      for (const method of service.methods) {
        if (!hasOption(method, http)) continue;
        for (const binding of bindingsOf(getOption(method, http))) routes.push(routeOf(method, binding));
      }
    }
    // Most specific template first, so /v1/keys/me wins over a /v1/keys/{id}.
    this.routes = routes.sort((a, b) => a.template.compare(b.template));
  }

  match(httpMethod: string, path: string): RouteMatch {
    const allowed: string[] = [];
    // HEAD is served like GET by Node (the body is dropped).
    const wanted = httpMethod === "HEAD" ? "GET" : httpMethod;
    for (const route of this.routes) {
      const pathParams = route.template.match(path);
      if (!pathParams) continue;
      if (route.httpMethod === wanted) return { kind: "route", route, pathParams };
      if (!allowed.includes(route.httpMethod)) allowed.push(route.httpMethod);
    }
    return allowed.length > 0 ? { kind: "wrong_method", allowed } : { kind: "none" };
  }
}
