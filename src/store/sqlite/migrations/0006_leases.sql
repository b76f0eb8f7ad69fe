-- Leases (`Write::Lease`): who runs a piece of background work (a bank connection's cut-off)
-- until when, so that one process at a time does, whatever processes share the database file
-- (a server and the command line beside it). `until` is microseconds since the epoch.
CREATE TABLE leases (
    name   TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    until  INTEGER NOT NULL
) WITHOUT ROWID;
