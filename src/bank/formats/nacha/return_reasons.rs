//! NACHA's return reason codes (Operating Rules, Appendix Four) with their titles, as a return's
//! `reason` shows them. A code missing here is still applied; its reason then says so.

/// The title of return code `code` (`R01`), if NACHA defines it.
pub fn return_reason(code: &str) -> Option<&'static str> {
    RETURN_REASONS.iter().find(|(c, _)| *c == code).map(|(_, title)| *title)
}

const RETURN_REASONS: &[(&str, &str)] = &[
    ("R01", "Insufficient Funds"),
    ("R02", "Account Closed"),
    ("R03", "No Account/Unable to Locate Account"),
    ("R04", "Invalid Account Number Structure"),
    ("R05", "Unauthorized Debit to Consumer Account Using Corporate SEC Code"),
    ("R06", "Returned per ODFI's Request"),
    ("R07", "Authorization Revoked by Customer"),
    ("R08", "Payment Stopped"),
    ("R09", "Uncollected Funds"),
    (
        "R10",
        "Customer Advises Originator is Not Known to Receiver and/or Originator is Not Authorized by Receiver to Debit Receiver's Account",
    ),
    ("R11", "Customer Advises Entry Not in Accordance with the Terms of the Authorization"),
    ("R12", "Account Sold to Another DFI"),
    ("R13", "Invalid ACH Routing Number"),
    ("R14", "Representative Payee Deceased or Unable to Continue in that Capacity"),
    ("R15", "Beneficiary or Account Holder (Other Than a Representative Payee) Deceased"),
    ("R16", "Account Frozen/Entry Returned per OFAC Instruction"),
    ("R17", "File Record Edit Criteria / Entry with Invalid Account Number Initiated Under Questionable Circumstances"),
    ("R18", "Improper Effective Entry Date"),
    ("R19", "Amount Field Error"),
    ("R20", "Non-Transaction Account"),
    ("R21", "Invalid Company Identification"),
    ("R22", "Invalid Individual ID Number"),
    ("R23", "Credit Entry Refused by Receiver"),
    ("R24", "Duplicate Entry"),
    ("R25", "Addenda Error"),
    ("R26", "Mandatory Field Error"),
    ("R27", "Trace Number Error"),
    ("R28", "Routing Number Check Digit Error"),
    ("R29", "Corporate Customer Advises Not Authorized"),
    ("R30", "RDFI Not Participant in Check Truncation Program"),
    ("R31", "Permissible Return Entry (CCD and CTX only)"),
    ("R32", "RDFI Non-Settlement"),
    ("R33", "Return of XCK Entry"),
    ("R34", "Limited Participation DFI"),
    ("R35", "Return of Improper Debit Entry"),
    ("R36", "Return of Improper Credit Entry"),
    ("R37", "Source Document Presented for Payment"),
    ("R38", "Stop Payment on Source Document"),
    ("R39", "Improper Source Document/Source Document Presented for Payment"),
    ("R40", "Return of ENR Entry by Federal Government Agency"),
    ("R41", "Invalid Transaction Code"),
    ("R42", "Routing Number/Check Digit Error"),
    ("R43", "Invalid DFI Account Number"),
    ("R44", "Invalid Individual ID Number/Identification Number"),
    ("R45", "Invalid Individual Name/Company Name"),
    ("R46", "Invalid Representative Payee Indicator"),
    ("R47", "Duplicate Enrollment"),
    ("R50", "State Law Affecting RCK Acceptance"),
    ("R51", "Item Related to RCK Entry is Ineligible or RCK Entry is Improper"),
    ("R52", "Stop Payment on Item Related to RCK Entry"),
    ("R53", "Item and RCK Entry Presented for Payment"),
    ("R61", "Misrouted Return"),
    ("R62", "Return of Erroneous or Reversing Debit"),
    ("R67", "Duplicate Return"),
    ("R68", "Untimely Return"),
    ("R69", "Field Error(s)"),
    ("R70", "Permissible Return Entry Not Accepted/Return Not Requested by ODFI"),
    ("R71", "Misrouted Dishonored Return"),
    ("R72", "Untimely Dishonored Return"),
    ("R73", "Timely Original Return"),
    ("R74", "Corrected Return"),
    ("R75", "Return Not a Duplicate"),
    ("R76", "No Errors Found"),
    ("R77", "Non-Acceptance of R62 Dishonored Return"),
    ("R80", "IAT Entry Coding Error"),
    ("R81", "Non-Participant in IAT Program"),
    ("R82", "Invalid Foreign Receiving DFI Identification"),
    ("R83", "Foreign Receiving DFI Unable to Settle"),
    ("R84", "Entry Not Processed by Gateway"),
    ("R85", "Incorrectly Coded Outbound International Payment"),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b5_return_codes_have_nacha_titles() {
        assert_eq!(return_reason("R01"), Some("Insufficient Funds"));
        assert_eq!(return_reason("R29"), Some("Corporate Customer Advises Not Authorized"));
        assert_eq!(return_reason("R99"), None);
        let mut codes: Vec<&str> = RETURN_REASONS.iter().map(|(c, _)| *c).collect();
        codes.dedup();
        assert_eq!(codes.len(), RETURN_REASONS.len(), "sorted, no code twice");
    }
}
