"""One self-contained HTML page of a simulated step: predicted vs measured,
lane timelines, the critical path, top ops, collectives, what-ifs and the
conversion accounting (``pt2chakra report``, ``convert --html``)."""
