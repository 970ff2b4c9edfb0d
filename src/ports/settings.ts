/** Operator settings shared by every replica (service_settings). */
export interface SettingsStore {
  /** Whether POST /v1/keys is open, as last set; undefined when never set (the configured default applies). */
  publicMinting(): Promise<boolean | undefined>;
  setPublicMinting(enabled: boolean): Promise<void>;
}
