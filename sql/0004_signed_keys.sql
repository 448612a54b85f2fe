-- Events are deduplicated by a key taken from the signed body (sume_wire::dedupe_key): the
-- body's event id, else "{job_id}/{type}". Before this version the unsigned X-Sume-Event-Id
-- header was the key, so anyone holding one signed delivery could replay it under fresh ids or
-- claim a future event's id. The header's id is now kept beside the key as a hint.
--
-- Rows stored before this version keep the key they had (the header's id): events_insert
-- looks a delivery's header id up among them, so a redelivery of an event stored before the
-- upgrade is still a duplicate. Retention removes those rows in time; the check then finds
-- nothing and costs one index probe per delivery whose header id differs from its key.
alter table sume.events add column header_event_id text;
