"""The bank's resources through the official SDK (SPEC B5, B7; issue 21): an expected payment the
sandbox bank books and reconciles, its transaction and line item; one from a counterparty, paid
from its account as the statement says; a payment order to account
10003 returned with R03 and its return; the incoming-payment simulation; balance reports listed.
Every reply is validated strictly against the SDK's models and checked complete."""

from modern_treasury.types import ExpectedPayment, IncomingPaymentDetail, ReturnObject, Transaction
from modern_treasury.types.internal_accounts import BalanceReport
from modern_treasury.types.transactions import TransactionLineItem

from conftest import account_input, checked, strict_list, wait_for


def test_the_sandbox_bank_books_and_reconciles_an_expected_payment(client, internal_account):
    expected = checked(
        client.expected_payments.create(
            amount_lower_bound=4321,
            amount_upper_bound=4321,
            direction="credit",
            internal_account_id=internal_account.id,
            currency="USD",
            type="ach",
        )
    )
    assert expected.status == "unreconciled"
    reconciled = wait_for(
        lambda: client.expected_payments.retrieve(expected.id),
        lambda e: e.status == "reconciled",
        timeout=20,
        what="the expected payment to be reconciled",
    )
    checked(reconciled)
    transaction = checked(client.transactions.retrieve(reconciled.transaction_id))
    assert (transaction.amount, transaction.direction, transaction.reconciled) == (4321, "credit", True)
    assert transaction.internal_account_id == internal_account.id
    items = strict_list(client.transactions.line_items, TransactionLineItem, transaction_id=transaction.id)
    assert [item.expected_payment_id for item in items] == [expected.id]
    listed = strict_list(client.expected_payments, ExpectedPayment, status="reconciled", internal_account_id=internal_account.id)
    assert expected.id in [e.id for e in listed]
    assert transaction.id in [t.id for t in strict_list(client.transactions, Transaction, internal_account_id=internal_account.id)]


def test_an_expected_payment_from_a_counterparty_is_paid_from_its_account(client, internal_account, counterparty):
    expected = checked(
        client.expected_payments.create(
            amount_lower_bound=2468,
            amount_upper_bound=2468,
            direction="credit",
            internal_account_id=internal_account.id,
            currency="USD",
            counterparty_id=counterparty.id,
        )
    )
    assert expected.counterparty_id == counterparty.id
    reconciled = wait_for(
        lambda: client.expected_payments.retrieve(expected.id),
        lambda e: e.status == "reconciled",
        timeout=20,
        what="the expected payment from a counterparty to be reconciled",
    )
    transaction = checked(client.transactions.retrieve(checked(reconciled).transaction_id))
    assert transaction.details["counterparty_name"] == counterparty.name
    assert transaction.details["counterparty_account_number"] == counterparty.accounts[0].account_details[0].account_number


def test_an_order_to_account_10003_is_returned_with_r03(client, internal_account):
    order = client.payment_orders.create(
        type="ach",
        amount=5150,
        direction="credit",
        originating_account_id=internal_account.id,
        receiving_account=account_input(account_number="10003"),
    )
    returned = wait_for(
        lambda: client.payment_orders.retrieve(order.id),
        lambda po: po.status == "returned",
        timeout=20,
        what="the order to be returned",
    )
    assert returned.current_return.code == "R03"
    ret = checked(client.returns.retrieve(returned.current_return.id))
    assert (ret.returnable_id, ret.code, ret.amount) == (order.id, "R03", 5150)
    assert ret.id in [r.id for r in strict_list(client.returns, ReturnObject, returnable_id=order.id, returnable_type="payment_order")]
    # The money booked back settles the return: a credit transaction, reconciled.
    assert ret.reconciliation_status == "reconciled" and ret.transaction_id is not None
    back = checked(client.transactions.retrieve(ret.transaction_id))
    assert (back.amount, back.direction, back.type) == (5150, "credit", "ach")


def test_a_returned_wire_and_rtp_books_transactions_the_sdk_reads(client, internal_account):
    """A reversal's transaction and every list page holding it validate strictly: `details`
    holds strings only (MT's `Dict[str, str]`), and each transaction has its order's rail."""
    for rail in ("wire", "rtp"):
        order = client.payment_orders.create(
            type=rail,
            amount=6160,
            direction="credit",
            originating_account_id=internal_account.id,
            receiving_account=account_input(
                account_number="10029",
                party_address={"line1": "1 Main St", "locality": "Springfield", "region": "IL", "postal_code": "62701", "country": "US"},
            ),
        )
        returned = wait_for(
            lambda: client.payment_orders.retrieve(order.id),
            lambda po: po.status == "returned" and len(po.transaction_ids) == 2,
            timeout=20,
            what=f"the {rail} order to be returned and its money booked back",
        )
        for transaction_id in returned.transaction_ids:
            transaction = checked(client.transactions.retrieve(transaction_id))
            assert transaction.type == rail
        reversal = checked(client.transactions.retrieve(returned.transaction_ids[1]))
        assert reversal.details.get("reversal") == "true"
    listed = strict_list(client.transactions, Transaction, internal_account_id=internal_account.id, per_page=100)
    assert all(isinstance(v, str) for t in listed for v in t.details.values())


def test_the_incoming_payment_simulation_and_balance_reports(client, internal_account):
    detail = checked(
        client.incoming_payment_details.create_async(
            amount=777, direction="credit", internal_account_id=internal_account.id, type="ach"
        )
    )
    found = checked(client.incoming_payment_details.retrieve(detail.id))
    assert (found.amount, found.direction, found.internal_account_id) == (777, "credit", internal_account.id)
    assert detail.id in [d.id for d in strict_list(client.incoming_payment_details, IncomingPaymentDetail, direction="credit")]
    reports = strict_list(client.internal_accounts.balance_reports, BalanceReport, internal_account_id=internal_account.id)
    assert isinstance(reports, list)
