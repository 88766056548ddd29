-- What a model request was for: `agent` (an agent's turn, through a group's
-- socket or the loopback listener) or `memory` (the host's own extraction
-- of observations and summaries, accounted to the group it was for). Daily
-- budgets count every purpose; `memory.daily_tokens` counts `memory` only.
ALTER TABLE model_usage ADD COLUMN purpose TEXT NOT NULL DEFAULT 'agent';

CREATE INDEX model_usage_caller_day_purpose ON model_usage (caller, day, purpose);
