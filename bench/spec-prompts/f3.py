def schedule_jobs(jobs, workers, deadline):
    queue = sorted(jobs, key=lambda job: (job["priority"], job["submitted"]))
    free_at = [0] * workers
    assignments = []
    late = []
    skipped = []
    busy_time = [0] * workers
    for job in queue:
        duration = job["duration"]
        if duration <= 0:
            skipped.append(job["name"])
            continue
        earliest = min(range(workers), key=lambda w: free_at[w])
        start = max(free_at[earliest], job["submitted"])
        finish = start + duration
        if finish > deadline and job.get("optional", False):
            skipped.append(job["name"])
            continue
        free_at[earliest] = finish
        busy_time[earliest] += duration
        assignments.append(
            {
                "job": job["name"],
                "worker": earliest,
                "start": start,
                "finish": finish,
            }
        )
        if finish > deadline:
            late.append(job["name"])
    makespan = max(free_at) if assignments else 0
    utilization = []
    for worker in range(workers):
        if makespan:
            utilization.append(busy_time[worker] / makespan)
        else:
            utilization.append(0.0)
    summary = {
        "assignments": assignments,
        "late": late,
        "skipped": skipped,
        "makespan": makespan,
        "utilization": utilization,
    }
    return summary
