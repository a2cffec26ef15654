-- A slot is one forward under way, not one job: a job claimed again after its worker died
-- forwards again while the dead worker's forward may still be at the target, so each
-- forward holds a slot of its own, keyed by the lease that made it, until it is released
-- or runs out at expires_at. Slots are soft state: those under way at the upgrade are not
-- carried over (a slot lasts a forward's timeout and a few seconds).
DROP TABLE destination_slots;
CREATE TABLE destination_slots (
    job_id       text NOT NULL,
    lease_token  text NOT NULL,
    destination  text NOT NULL,
    expires_at   {time} NOT NULL,
    PRIMARY KEY (job_id, lease_token)
);
CREATE INDEX destination_slots_destination_idx ON destination_slots (destination, expires_at);
