/**
 * The public-minting switch (issue 17): whether anyone may mint a key with
 * POST /v1/keys. The operator sets it through the admin API; it lives in the
 * database, so every replica and every restart sees the same state, and is
 * read on each public mint (rare next to the traffic it guards) rather than
 * cached. Until it is first set, the configured default applies.
 */
import { ApiError } from "../model/errors.js";
import type { SettingsStore } from "../ports/settings.js";
import type { SecurityAudit } from "./audit.js";

export class PublicMinting {
  constructor(
    private readonly store: SettingsStore,
    private readonly audit: SecurityAudit,
    private readonly byDefault: boolean,
  ) {}

  async enabled(): Promise<boolean> {
    return (await this.store.publicMinting()) ?? this.byDefault;
  }

  async set(enabled: boolean): Promise<boolean> {
    // Service-wide: no owner, so only the operator's audit listing shows it.
    await this.audit.change(
      () => this.store.setPublicMinting(enabled),
      () => [{ kind: "minting.switched", ownerKeyId: null, ownerId: null, actorKeyId: null, subject: "public_minting", details: { enabled } }],
    );
    return enabled;
  }

  /** Throws 403 minting_closed while public minting is closed. */
  async assertOpen(): Promise<void> {
    if (!(await this.enabled())) throw new ApiError("minting_closed");
  }
}
