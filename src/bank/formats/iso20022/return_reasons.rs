//! ISO 20022's return reason codes (`ExternalReturnReason1Code`) that banks send most, with
//! their names from the external code list: what a returned order's `current_return.reason`
//! says when a statement's reversal gives only the code.

/// The name of the ISO return reason `code`, if it is one of the common ones.
pub fn return_reason(code: &str) -> Option<&'static str> {
    RETURN_REASONS.iter().find(|(c, _)| *c == code).map(|(_, name)| *name)
}

const RETURN_REASONS: &[(&str, &str)] = &[
    ("AC01", "Incorrect Account Number"),
    ("AC03", "Invalid Creditor Account Number"),
    ("AC04", "Closed Account Number"),
    ("AC06", "Blocked Account"),
    ("AG01", "Transaction Forbidden"),
    ("AG02", "Invalid Bank Operation Code"),
    ("AM04", "Insufficient Funds"),
    ("AM05", "Duplication"),
    ("BE04", "Missing Creditor Address"),
    ("CUST", "Requested By Customer"),
    ("DUPL", "Duplicate Payment"),
    ("FOCR", "Following Cancellation Request"),
    ("FRAD", "Fraudulent Origin"),
    ("MD07", "End Customer Deceased"),
    ("MS02", "Not Specified Reason Customer Generated"),
    ("MS03", "Not Specified Reason Agent Generated"),
    ("NARR", "Narrative"),
    ("RC01", "Bank Identifier Incorrect"),
    ("RR04", "Regulatory Reason"),
    ("TM01", "Invalid Cut Off Time"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_four_characters_sorted_and_once() {
        assert!(RETURN_REASONS.iter().all(|(c, _)| c.len() == 4));
        assert!(RETURN_REASONS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(return_reason("AC04"), Some("Closed Account Number"));
        assert_eq!(return_reason("R01"), None);
    }
}
