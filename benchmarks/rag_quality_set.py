"""A small retrieval-quality set of our own: an operations manual for a made-up database service
("Quarry"), cut into 30 passages, and 60 questions — for each passage one PARAPHRASE (no word of its
identifier, different wording) and one IDENTIFIER question (the exact error code or setting name,
as a user pastes it). ``relevant`` names the passage that answers each question."""

from __future__ import annotations

PASSAGES: dict[str, str] = {
    "e1054": "Error E1054 means the replication slot named in the standby's configuration no longer exists "
    "on the primary. Recreate the slot with quarry slot create, then restart the standby.",
    "e2211": "Error E2211 is raised when a client sends a query larger than the server's message limit. "
    "Split the statement or raise max_message_bytes on the server.",
    "e3090": "Error E3090 reports that the disk holding the write-ahead log is full. Free space or move the "
    "log to a larger volume; writes are refused until then.",
    "e4127": "Error E4127 appears when a TLS client certificate has expired. Issue a new certificate "
    "from your authority and reload the server.",
    "e5002": "Error E5002 signals a deadlock between two transactions; one of them was rolled back. Retry "
    "the transaction, and take locks in the same order everywhere.",
    "e6310": "Error E6310 means the backup archive failed its checksum during restore. Fetch the archive "
    "again; a partial download is the usual cause.",
    "max_wal_size": "The setting max_wal_size bounds how much write-ahead log may accumulate between two "
    "automatic checkpoints. A larger value means fewer checkpoints and a longer crash recovery.",
    "checkpoint_timeout": "The setting checkpoint_timeout is the longest time between automatic "
    "checkpoints, five minutes by default.",
    "retry_backoff_ms": "The client option retry_backoff_ms sets the first pause before a failed request is "
    "tried again; each later pause doubles, up to a minute.",
    "pool_max_idle": "pool_max_idle limits how many unused connections the client pool keeps open; "
    "connections above it are closed after thirty seconds.",
    "statement_timeout": "statement_timeout cancels any single query that runs longer than the given "
    "number of milliseconds; zero turns the limit off.",
    "vacuum_cost_limit": "vacuum_cost_limit is the amount of work the background cleaner may do before it "
    "sleeps, which keeps cleanup from slowing down user queries.",
    "x_request_budget": "The HTTP header X-Request-Budget tells the gateway how many milliseconds the "
    "caller is willing to wait; the gateway drops the request once the budget is spent.",
    "quarry_dump": "quarry dump --consistent writes a snapshot of every table to one file without "
    "blocking writers, using a repeatable-read transaction.",
    "quarry_slot": "quarry slot list shows each replication slot with the log position it holds back, so "
    "you can find the slot that keeps old log files from being removed.",
    "read_replicas": "Read replicas receive the log stream from the primary and serve read-only queries. "
    "Their lag is shown in the replication dashboard.",
    "failover": "During a failover the standby with the most recent log position is promoted to primary; "
    "clients reconnect through the service address within seconds.",
    "encryption_rest": "Data at rest is encrypted with AES-256 keys held in the key service; rotating a "
    "key re-encrypts pages in the background.",
    "audit_log": "The audit log records every login, role change and schema change with the user, the "
    "address and the time; it is kept for ninety days.",
    "quotas": "Each project has a storage quota; at ninety percent usage the owners get an email, and at "
    "the limit new writes fail until space is freed.",
    "pitr": "Point-in-time recovery restores a database to any second of the last seven days by replaying "
    "archived log on top of the nightly base backup.",
    "indexes": "A partial index covers only the rows that match its condition, which keeps it small when "
    "queries always filter on the same column value.",
    "connection_limit": "A project accepts at most five hundred simultaneous connections; use the built-in "
    "pooler when many short-lived clients connect.",
    "maintenance_window": "Maintenance runs on Sundays between two and four in the morning UTC; minor "
    "upgrades restart the server once during that window.",
    "billing": "Storage is billed by the gibibyte-month and compute by the second of running time; "
    "stopped databases pay for storage only.",
    "sso": "Single sign-on works with any SAML 2.0 identity provider; map the provider's groups to Quarry "
    "roles on the access page.",
    "metrics_export": "Metrics are exported in the Prometheus text format on port 9187 of each node, "
    "including cache hit ratio and replication lag.",
    "slow_query_log": "Queries slower than log_min_duration_ms are written to the slow query log together "
    "with their plans, which helps find missing indexes.",
    "e7001": "Error E7001 says the project's storage quota is exhausted; delete data or ask for a larger "
    "quota before writing again.",
    "e8040": "Error E8040 means the server rejected the password because it is older than the rotation "
    "period; set a new password for the role.",
}

QUESTIONS: list[tuple[str, str, str]] = [
    # (kind, question, relevant passage)
    (
        "paraphrase",
        "The standby stopped following because the primary lost its replication slot, what now?",
        "e1054",
    ),
    ("identifier", "E1054", "e1054"),
    ("paraphrase", "My statement is too big for the server to accept", "e2211"),
    ("identifier", "what does E2211 mean", "e2211"),
    ("paraphrase", "writes fail because the volume with the transaction log has no room left", "e3090"),
    ("identifier", "E3090 on the primary", "e3090"),
    ("paraphrase", "connection refused since our client TLS cert is out of date", "e4127"),
    ("identifier", "got E4127", "e4127"),
    ("paraphrase", "two transactions blocked each other and one got cancelled", "e5002"),
    ("identifier", "E5002 deadlock?", "e5002"),
    ("paraphrase", "restoring the backup says the file is corrupted", "e6310"),
    ("identifier", "E6310", "e6310"),
    ("paraphrase", "how much log can pile up before a checkpoint is forced", "max_wal_size"),
    ("identifier", "max_wal_size", "max_wal_size"),
    ("paraphrase", "what is the longest interval between automatic checkpoints", "checkpoint_timeout"),
    ("identifier", "checkpoint_timeout default", "checkpoint_timeout"),
    ("paraphrase", "how long does the client wait before trying a failed call again", "retry_backoff_ms"),
    ("identifier", "retry_backoff_ms", "retry_backoff_ms"),
    ("paraphrase", "how many spare connections does the pool keep around", "pool_max_idle"),
    ("identifier", "pool_max_idle", "pool_max_idle"),
    ("paraphrase", "kill queries that run too long", "statement_timeout"),
    ("identifier", "statement_timeout zero", "statement_timeout"),
    ("paraphrase", "cleanup work is making my queries slow, how to throttle it", "vacuum_cost_limit"),
    ("identifier", "vacuum_cost_limit", "vacuum_cost_limit"),
    ("paraphrase", "how do I tell the gateway how long I am prepared to wait", "x_request_budget"),
    ("identifier", "X-Request-Budget header", "x_request_budget"),
    ("paraphrase", "export all tables to a file while the app keeps writing", "quarry_dump"),
    ("identifier", "quarry dump --consistent", "quarry_dump"),
    ("paraphrase", "old log files are never deleted, which slot is holding them", "quarry_slot"),
    ("identifier", "quarry slot list", "quarry_slot"),
    ("paraphrase", "can I send read-only traffic to copies of the database", "read_replicas"),
    ("identifier", "read replicas lag", "read_replicas"),
    ("paraphrase", "what happens when the main server dies", "failover"),
    ("identifier", "failover promotion", "failover"),
    ("paraphrase", "is my data encrypted on disk", "encryption_rest"),
    ("identifier", "AES-256 key rotation", "encryption_rest"),
    ("paraphrase", "who changed the schema and when", "audit_log"),
    ("identifier", "audit log retention", "audit_log"),
    ("paraphrase", "what happens when the project runs out of space", "quotas"),
    ("identifier", "storage quota email", "quotas"),
    ("paraphrase", "bring the database back to how it was yesterday at noon", "pitr"),
    ("identifier", "point-in-time recovery", "pitr"),
    ("paraphrase", "an index that only covers some rows", "indexes"),
    ("identifier", "partial index", "indexes"),
    ("paraphrase", "too many clients connecting at once", "connection_limit"),
    ("identifier", "500 connections limit", "connection_limit"),
    ("paraphrase", "when are upgrades applied", "maintenance_window"),
    ("identifier", "maintenance window Sunday", "maintenance_window"),
    ("paraphrase", "how am I charged", "billing"),
    ("identifier", "gibibyte-month", "billing"),
    ("paraphrase", "log in with our company identity provider", "sso"),
    ("identifier", "SAML 2.0", "sso"),
    ("paraphrase", "scrape monitoring numbers into our dashboards", "metrics_export"),
    ("identifier", "port 9187", "metrics_export"),
    ("paraphrase", "find the queries that take too long and their plans", "slow_query_log"),
    ("identifier", "log_min_duration_ms", "slow_query_log"),
    ("paraphrase", "writes rejected because we used all our space", "e7001"),
    ("identifier", "E7001", "e7001"),
    ("paraphrase", "my password is no longer accepted since it is too old", "e8040"),
    ("identifier", "E8040", "e8040"),
]
