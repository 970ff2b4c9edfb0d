-- Records a pick's deliveries of its rated limits in their second
-- (limit_deliveries; docs/decisions.md#shared-limits): lim_used[k] deliveries
-- of lim_ids[k], whose rate is per lim_per[k] seconds (NULL: no rate).
CREATE OR REPLACE FUNCTION agentbus_count_deliveries(lim_ids uuid[], lim_per integer[], lim_used integer[], p_now timestamptz)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
  FOR k IN 1 .. coalesce(cardinality(lim_ids), 0) LOOP
    IF lim_per[k] IS NOT NULL AND lim_used[k] > 0 THEN
      INSERT INTO limit_deliveries AS d (limit_id, delivered_at, n) VALUES (lim_ids[k], date_trunc('second', p_now), lim_used[k])
      ON CONFLICT (limit_id, delivered_at) DO UPDATE SET n = d.n + excluded.n;
    END IF;
  END LOOP;
END;
$$;
