"""What admins do with the queue: inspect, retry, discard, cancel; every change audited."""
