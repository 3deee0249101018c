"""What both services' HTTP layers share: the app skeleton, problem details, auth guards, health and schemas."""
