/** The planner statistics the service keeps for its hot tables (docs/decisions.md#planner-statistics). */
export interface PlannerStatistics {
  /** ANALYZEs the hot tables whose size moved enough from the planner's estimate; the ones it analysed. */
  analyzeStale(): Promise<string[]>;
}
