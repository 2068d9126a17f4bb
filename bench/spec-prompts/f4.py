def merge_intervals(intervals, gap, labels):
    if not intervals:
        return []
    ordered = sorted(zip(intervals, labels), key=lambda pair: pair[0][0])
    merged = []
    current_start, current_end = ordered[0][0]
    current_labels = [ordered[0][1]]
    for (start, end), label in ordered[1:]:
        if start > end:
            start, end = end, start
        if start <= current_end + gap:
            if end > current_end:
                current_end = end
            if label not in current_labels:
                current_labels.append(label)
        else:
            merged.append(
                {
                    "start": current_start,
                    "end": current_end,
                    "length": current_end - current_start,
                    "labels": current_labels,
                }
            )
            current_start = start
            current_end = end
            current_labels = [label]
    merged.append(
        {
            "start": current_start,
            "end": current_end,
            "length": current_end - current_start,
            "labels": current_labels,
        }
    )
    total = 0
    longest = merged[0]
    for item in merged:
        total += item["length"]
        if item["length"] > longest["length"]:
            longest = item
    for item in merged:
        item["share"] = item["length"] / total if total else 0.0
        item["longest"] = item is longest
    return merged
