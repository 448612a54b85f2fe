-- A give-up (closed_by = 'give_up', state 'expired') is the daemon's guess, not Sume's word: a
-- terminal status from Sume that comes later (a late webhook, a replay) supersedes it. The job
-- then takes Sume's state and the give-up is kept here, as it was: its state, Sume's last
-- status, when, and why.
alter table sume.jobs add column superseded_give_up jsonb;
