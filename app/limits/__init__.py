"""Abuse limits: submissions per client address and per form, SMS and email sent per form per day."""
