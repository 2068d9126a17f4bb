def summarize_orders(orders, tax_rate, currency):
    totals = {}
    counts = {}
    largest = None
    refunds = []
    for order in orders:
        customer = order["customer"]
        amount = order["amount"]
        status = order.get("status", "open")
        if status == "cancelled":
            continue
        if status == "refunded":
            refunds.append(order["id"])
            amount = -amount
        taxed = amount * (1 + tax_rate)
        if customer not in totals:
            totals[customer] = 0.0
            counts[customer] = 0
        totals[customer] += taxed
        counts[customer] += 1
        if largest is None or taxed > largest["amount"]:
            largest = {"id": order["id"], "amount": taxed}
    report = []
    for customer in sorted(totals):
        total = totals[customer]
        count = counts[customer]
        average = total / count if count else 0.0
        line = "%s: %d orders, total %.2f %s, average %.2f %s" % (
            customer,
            count,
            total,
            currency,
            average,
            currency,
        )
        report.append(line)
    if largest is not None:
        report.append("largest order: %s (%.2f %s)" % (largest["id"], largest["amount"], currency))
    if refunds:
        report.append("refunded: " + ", ".join(str(r) for r in refunds))
    grand_total = sum(totals.values())
    report.append("grand total: %.2f %s" % (grand_total, currency))
    return "\n".join(report)
