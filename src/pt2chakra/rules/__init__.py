"""The rules every stage shares about a Chakra trace, one floor above the
wire format (``chakra/``): the conventions (lanes, step window, alignment
modes, error %), dependency cycles, collective rendezvous, and the checks
``validate`` runs. Each rule lives here once; its consumers call it."""
