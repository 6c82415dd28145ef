"""The pure core: the lifecycle machine, the escalation curve and retry policies, the retry
state and journal models, detection of the gate's verdict, the resume point, failure
signatures and the reports' markdown. Nothing here touches a file, a process or the clock."""
