"""Pages for people: the hosted form applicants fill in."""
