//! The kinds of document the domain stores, in one list: a module that refers to another's
//! documents (an external account naming its counterparty) names the kind here, and need not
//! import the module that owns it.

pub const COUNTERPARTY: &str = "counterparty";
pub const EXTERNAL_ACCOUNT: &str = "external_account";
pub const INTERNAL_ACCOUNT: &str = "internal_account";
pub const PAYMENT_ORDER: &str = "payment_order";
/// The store's outbox kind: events are what it keeps in commit order for webhooks.
pub const EVENT: &str = crate::store::OUTBOX_KIND;
pub const WEBHOOK_ENDPOINT: &str = "webhook_endpoint";
/// The private half of a webhook endpoint: its secret and outbox cursor. Never served by any route.
pub const WEBHOOK_ENDPOINT_STATE: &str = "webhook_endpoint_state";
pub const WEBHOOK_DELIVERY: &str = "webhook_delivery";
pub const LEDGER: &str = "ledger";
pub const LEDGER_ACCOUNT: &str = "ledger_account";
pub const LEDGER_TRANSACTION: &str = "ledger_transaction";
pub const LEDGER_TRANSACTION_VERSION: &str = "ledger_transaction_version";
pub const LEDGER_ENTRY: &str = "ledger_entry";
/// A bank connection registered by an operator (SPEC B1), served as MT's `connection`.
pub const CONNECTION: &str = "connection";
/// The private half of a connection: its settings and sealed credentials. Never served.
pub const CONNECTION_SETTINGS: &str = "connection_settings";
pub const LEDGER_ACCOUNT_BALANCE_MONITOR: &str = "ledger_account_balance_monitor";
pub const LEDGER_ACCOUNT_SETTLEMENT: &str = "ledger_account_settlement";
pub const LEDGER_ACCOUNT_CATEGORY: &str = "ledger_account_category";
/// A ledger account's membership of a category (parent: the category). Never served by any route.
pub const LEDGER_ACCOUNT_CATEGORY_MEMBER: &str = "ledger_account_category_member";
/// A category nested in another (parent: the outer category). Never served by any route.
pub const LEDGER_ACCOUNT_CATEGORY_NESTING: &str = "ledger_account_category_nesting";
pub const LEDGER_ACCOUNT_STATEMENT: &str = "ledger_account_statement";
/// A file sent to or received from a bank (SPEC B6): its name, rail, status and totals. Never
/// served by the API; the command line lists and shows files.
pub const BANK_FILE: &str = "bank_file";
/// What a bank file carries, frozen when its orders were claimed: a slice of its entries, from
/// which the file is written (and written again, byte for byte, after a crash).
pub const BANK_FILE_PART: &str = "bank_file_part";
/// The next ACH trace sequence of a connection (id: `<connection id>.traces`), so that its trace
/// numbers are unique across its files, not only within one. Never served.
pub const BANK_TRACE_COUNTER: &str = "bank_trace_counter";
/// A booked bank statement entry (SPEC B5), served as MT's `transaction`. Made by the inbound
/// worker and the sandbox simulation, never by a client.
pub const TRANSACTION: &str = "transaction";
/// What a transaction settles (parent: the transaction), served as MT's `transaction_line_item`.
pub const TRANSACTION_LINE_ITEM: &str = "transaction_line_item";
/// A return reported by the bank (SPEC B5), served as MT's `return`.
pub const RETURN: &str = "return";
pub const EXPECTED_PAYMENT: &str = "expected_payment";
pub const INCOMING_PAYMENT_DETAIL: &str = "incoming_payment_detail";
/// An internal account's balances as the bank reported them (parent: the internal account).
pub const BALANCE_REPORT: &str = "balance_report";
/// A file received from a bank (SPEC B5, B6): its name, format, content hash and what it did.
/// Never served by the API; the command line lists and shows files.
pub const BANK_INBOUND_FILE: &str = "bank_inbound_file";
/// A slice of a received file's bytes, kept so any instance can show the file.
pub const BANK_INBOUND_FILE_CHUNK: &str = "bank_inbound_file_chunk";
