"""Reads NACHA files with carta-ach (PyPI `carta-ach`, the `ach` package), a parser nobody on
Payrail wrote, and prints what it sees as JSON for tests/nacha_files.rs to compare with what
Payrail wrote.

carta-ach's Parser only slices each record into its fields by position; it checks nothing. So
this script also recomputes, in Python, what the control records must say (entry and addenda
count, entry hash = sum of the RDFI 8-digit identifications mod 10^10, debit and credit totals
from the transaction codes, batch count, block count) and passes every field through carta-ach's
own field validators (`Ach.validate_numeric_field`, `Ach.validate_alpha_numeric_field`),
reporting any field they would change or refuse. Positions of the CTX-specific fields (number of
addenda records, receiving company name) are read from carta's `ind_name` slice, which covers
them.

Usage: check.py FILE... ; prints one JSON object per file, as a JSON list.
"""

import json
import sys

from ach.data_types import Ach, AchError
from ach.parser import Parser

CREDIT_CODES = {"21", "22", "23", "31", "32", "33"}
DEBIT_CODES = {"26", "27", "28", "36", "37", "38"}

# Fields carta-ach's parser names, and the kind of field NACHA makes them.
NUMERIC = {
    "entry_detail": ["transaction_code", "recv_dfi_id", "check_digit", "amount", "add_rec_ind", "trace_num"],
    "batch_header": ["serv_cls_code", "eff_ent_date", "orig_dfi_id", "batch_id"],
    "batch_control": ["serv_cls_code", "entadd_count", "entry_hash", "debit_amount", "credit_amount", "orig_dfi_id"],
    "file_control": ["batch_count", "block_count", "entadd_count", "entry_hash", "debit_amount", "credit_amount"],
    "addenda": ["addenda_type_code", "add_seq_num", "ent_det_seq_num"],
}
ALPHA = {
    "entry_detail": ["dfi_acnt_num", "ind_id", "ind_name", "disc_data"],
    "batch_header": ["company_name", "cmpy_dis_data", "company_id", "std_ent_cls_code", "entry_desc", "desc_date"],
    "file_header": ["im_dest_name ", "im_orgn_name ", "reference_code"],
    "addenda": ["pmt_rel_info"],
}


def carta_rejects(kind, record):
    """Fields carta-ach's validators refuse or would rewrite."""
    ach = Ach()
    out = []
    for name in NUMERIC.get(kind, []):
        value = record[name]
        try:
            if ach.validate_numeric_field(value, len(value)) != value:
                out.append(f"{kind}.{name}={value!r} rewritten")
        except AchError as err:
            out.append(f"{kind}.{name}={value!r}: {err}")
    for name in ALPHA.get(kind, []):
        value = record[name]
        try:
            if ach.validate_alpha_numeric_field(value, len(value)) != value:
                out.append(f"{kind}.{name}={value!r} rewritten")
        except AchError as err:
            out.append(f"{kind}.{name}={value!r}: {err}")
    return out


def entry_of(entry, sec, rejects):
    detail = entry["entry_detail"]
    rejects += carta_rejects("entry_detail", detail)
    name_field = detail["ind_name"]
    out = {
        "transaction_code": detail["transaction_code"],
        "routing_number": detail["recv_dfi_id"] + detail["check_digit"],
        "account_number": detail["dfi_acnt_num"].rstrip(),
        "amount": int(detail["amount"]),
        "identification": detail["ind_id"].rstrip(),
        "discretionary_data": detail["disc_data"].rstrip(),
        "addenda_indicator": detail["add_rec_ind"],
        "trace_number": detail["trace_num"],
        "addenda": [],
    }
    if sec == "CTX":
        out["number_of_addenda"] = int(name_field[:4])
        out["name"] = name_field[4:20].rstrip()
    else:
        out["name"] = name_field.rstrip()
    for addenda in entry["addenda"]:
        rejects += carta_rejects("addenda", addenda)
        out["addenda"].append({
            "type": addenda["addenda_type_code"],
            "text": addenda["pmt_rel_info"].rstrip(),
            "sequence": int(addenda["add_seq_num"]),
            "entry_sequence": addenda["ent_det_seq_num"],
        })
    return out


def control_of(record):
    return {
        "entry_addenda_count": int(record["entadd_count"]),
        "entry_hash": int(record["entry_hash"]),
        "debit": int(record["debit_amount"]),
        "credit": int(record["credit_amount"]),
    }


def computed_of(entries):
    totals = {"entry_addenda_count": 0, "entry_hash": 0, "debit": 0, "credit": 0}
    for entry in entries:
        totals["entry_addenda_count"] += 1 + len(entry["addenda"])
        totals["entry_hash"] += int(entry["routing_number"][:8])
        code = entry["transaction_code"]
        if code in CREDIT_CODES:
            totals["credit"] += entry["amount"]
        elif code in DEBIT_CODES:
            totals["debit"] += entry["amount"]
        else:
            raise SystemExit(f"transaction code {code!r} is neither a credit nor a debit")
    totals["entry_hash"] %= 10**10
    return totals


def batch_of(batch, rejects):
    header = batch["batch_header"]
    rejects += carta_rejects("batch_header", header)
    rejects += carta_rejects("batch_control", batch["batch_control"])
    sec = header["std_ent_cls_code"]
    entries = [entry_of(e, sec, rejects) for e in batch["entries"]]
    return {
        "service_class": header["serv_cls_code"],
        "company_name": header["company_name"].rstrip(),
        "company_id": header["company_id"].rstrip(),
        "sec": sec,
        "entry_description": header["entry_desc"].rstrip(),
        "descriptive_date": header["desc_date"].rstrip(),
        "effective_entry_date": header["eff_ent_date"],
        "odfi": header["orig_dfi_id"],
        "batch_number": int(header["batch_id"]),
        "entries": entries,
        "control": control_of(batch["batch_control"]),
        "control_service_class": batch["batch_control"]["serv_cls_code"],
        "computed": computed_of(entries),
    }


def check(path):
    with open(path, encoding="ascii") as f:
        text = f.read()
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    parsed = Parser(text).as_dict()
    rejects = []
    header = parsed["file_header"]
    rejects += carta_rejects("file_header", header)
    rejects += carta_rejects("file_control", parsed["file_control"])
    batches = [batch_of(b, rejects) for b in parsed["batches"]]
    computed = computed_of([e for b in batches for e in b["entries"]])
    computed["batch_count"] = len(batches)
    computed["block_count"] = len(lines) // 10
    control = control_of(parsed["file_control"])
    control["batch_count"] = int(parsed["file_control"]["batch_count"])
    control["block_count"] = int(parsed["file_control"]["block_count"])
    return {
        "line_count": len(lines),
        "line_lengths": sorted({len(line) for line in lines}),
        "padding_lines": sum(1 for line in lines if line == "9" * 94),
        "file_header": {
            "immediate_destination": header["immediate_dest"],
            "immediate_origin": header["immediate_org"],
            "creation_date": header["file_crt_date"],
            "creation_time": header["file_crt_time"],
            "file_id_modifier": header["file_id_mod"],
            "record_size": header["record_size"],
            "blocking_factor": header["blk_factor"],
            "destination_name": header["im_dest_name "].rstrip(),
            "origin_name": header["im_orgn_name "].rstrip(),
        },
        "batches": batches,
        "file_control": control,
        "computed": computed,
        "carta_rejects": rejects,
    }


if __name__ == "__main__":
    print(json.dumps([check(path) for path in sys.argv[1:]], indent=1))
