"""REST API of API tokens: /api/v1/api-tokens/ (+ {id}/revoke/)."""
